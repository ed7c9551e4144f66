"""Plots of what heaprank learned and tuned, and of retention policies: ``pip install
'heaprank[plot]'`` (matplotlib).

Each plot is a function that draws into a PNG file, and an entry of :data:`PLOTS` that the
command line runs as ``heaprank plot NAME --state URL --out FILE.png``: to add a plot, write its
function and register a :class:`PlotCommand` (its own options and how it reads the reranker).
matplotlib is imported only when a plot is drawn, and drawn on a :class:`~matplotlib.figure.Figure`
of its own (no pyplot, no global backend), so plotting is safe in a server process too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optional import require
from .._time import DAY_S
from ..config import Weights
from ..errors import InputError
from ..model.retention import (
    PolicySet,
    RetentionPolicy,
    days_until_forgotten,
    load_policy,
    resolve_policy,
    retention,
    stability_days,
)
from .options import known_namespace, number, whole_number

if TYPE_CHECKING:
    from ..learning.tuning import TuneFit, TuneResult
    from ..reranker import Link, Reranker

DPI = 120


def _figure(width: float, height: float) -> Any:
    figure = require("matplotlib.figure", extra="plot", feature="heaprank plots")
    return figure.Figure(figsize=(width, height), layout="constrained")


def plot_links(links: Sequence[Link], out: str | os.PathLike[str], *, limit: int = 20,
               title: str = "Strongest learned links") -> None:
    """The ``limit`` strongest links (as :meth:`Reranker.links` orders them): P(useful) with its
    90% interval, one row each, labelled with the feature and its evidence ``n``."""
    rows = [r for r in links if r.n > 0][:limit]  # a link with no evidence is only the prior
    fig = _figure(8.0, 1.2 + 0.32 * max(len(rows), 1))
    ax = fig.subplots()
    if not rows:
        ax.text(0.5, 0.5, "no learned links", ha="center", va="center", transform=ax.transAxes)
    y = list(range(len(rows)))[::-1]
    p = [r.p for r in rows]
    ax.barh(y, p, color="#4c78a8", alpha=0.35)
    ax.errorbar(p, y, xerr=[[r.p - r.low for r in rows], [r.high - r.p for r in rows]],
                fmt="o", color="#1f3b5c", capsize=3, label="P(useful), 90% interval")
    ax.set_yticks(y, [f"{r.feature}  (n {r.n:.0f})" for r in rows])
    ax.set_xlabel("P(useful | feature)")
    ax.set_xlim(0, min(1.0, max([r.high for r in rows], default=1.0) * 1.1 + 1e-3))
    ax.set_title(title)
    fig.savefig(out, dpi=DPI)


def plot_tune(result: TuneResult, out: str | os.PathLike[str], *,
              max_namespaces: int = 12) -> list[str]:
    """The fitted weights of the pooled fit and of each namespace (the ``max_namespaces`` with
    most impressions), each with its approximate 90% interval; the current weights as bars.
    A fit that did not move is drawn hollow; one with too little data to fit is left out.

    Only the weights some fit tuned are drawn (a signal the log does not carry keeps its value
    and would show as a fitted-looking point); a fitted half-life gets a panel of its own, in
    days. The legend sits below the panels, clear of the points. Returns what was drawn: the
    weight names, then ``"half-life days"`` if its panel was.
    """
    fig, drawn = _tune_figure(result, max_namespaces)
    fig.savefig(out, dpi=DPI)
    return drawn


def _tuned_names(fits: Sequence[TuneFit], current: Weights) -> list[str]:
    """The weights a fit moved or gave an interval, in :class:`Weights` order (all of them
    when no fit was drawn: the current weights are then the whole picture)."""
    names = [f.name for f in fields(Weights)]
    if not fits:
        return names
    return [n for n in names if any(n in f.intervals or getattr(f.fitted, n) != getattr(current, n)
                                    for f in fits)]


def _tune_figure(result: TuneResult, max_namespaces: int) -> tuple[Any, list[str]]:
    fits = [result.pooled] + sorted(result.namespaces.values(),
                                    key=lambda f: -f.impressions)[:max_namespaces]
    drawn = [f for f in fits if f.fitted is not None]
    current = result.start.weights
    names = _tuned_names(drawn, current)
    half_life = [f for f in drawn if "half_life_s" in f.intervals]
    fig = _figure(max(6.0, 1.5 * len(names) + (1.8 if half_life else 0.0)), 4.8)
    if half_life:
        ax, hl_ax = fig.subplots(1, 2, width_ratios=[len(names), 1.3])
    else:
        ax, hl_ax = fig.subplots(), None
    ax.bar(range(len(names)), [getattr(current, n) for n in names], width=0.8, color="#dddddd",
           label="current weights")
    width = 0.7 / max(len(drawn), 1)
    for j, fit in enumerate(drawn):
        x = [k - 0.35 + width * (j + 0.5) for k in range(len(names))]
        value = [getattr(fit.fitted, n) for n in names]
        low = [v - fit.intervals.get(n, (v, v))[0] for n, v in zip(names, value)]
        high = [fit.intervals.get(n, (v, v))[1] - v for n, v in zip(names, value)]
        line = ax.errorbar(x, value, yerr=[low, high], fmt="o", capsize=3, label=_fit_label(fit),
                           markerfacecolor=None if fit.moved else "white")
        if hl_ax is not None and fit in half_life:
            days = (fit.fitted_half_life_s or 0.0) / DAY_S
            lo, hi = (v / DAY_S for v in fit.intervals["half_life_s"])
            hl_ax.errorbar([j], [days], yerr=[[days - lo], [hi - days]], fmt="o", capsize=3,
                           color=line.lines[0].get_color(),
                           markerfacecolor=None if fit.moved else "white")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("weight (exponent)")
    if drawn:
        ax.set_title("Fitted weights, 90% intervals")
    else:  # the reason in the title, above the bars, never over them
        ax.set_title("Current weights: nothing fitted\n" + textwrap.fill(result.fit.reason, 90),
                     fontsize="medium")
    if hl_ax is not None:
        hl_ax.axhline(result.start.retention.half_life_s / DAY_S, color="#999999", lw=1.0, ls="--")
        hl_ax.set_xticks([])
        hl_ax.set_xlim(-0.7, len(drawn) - 0.3)
        hl_ax.set_ylim(bottom=0.0)
        hl_ax.set_ylabel("days")
        hl_ax.set_title("Half-life\n(dashed: current)", fontsize="medium")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)),
               fontsize="small")
    return fig, names + (["half-life days"] if hl_ax is not None else [])


def _fit_label(fit: TuneFit) -> str:
    who = "pooled" if fit.namespace is None else fit.namespace
    state = "moved" if fit.moved else "kept"
    return f"{who} ({fit.impressions} impressions, {state})"


#: Rows and columns of the forget matrix: importance doses (1 is neutral) and use counts.
MATRIX_IMPORTANCE = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)
MATRIX_USES = (0, 1, 2, 5, 10, 20, 50, 100)
GLOBAL_POLICY = "global default"


def policy_groups(policies: PolicySet, namespaces: Sequence[str] = ()
                  ) -> list[tuple[str, RetentionPolicy]]:
    """One ``(label, policy)`` per distinct policy: the global default (with how many of
    ``namespaces`` follow it) and each namespace with overrides, in file order."""
    following = [ns for ns in namespaces if ns not in policies.namespaces]
    label = GLOBAL_POLICY + (f" ({len(following)} namespaces)" if namespaces else "")
    return [(label, policies.default)] + [(ns, policies.for_namespace(ns))
                                          for ns in policies.namespaces]


def plot_retention(policies: PolicySet, out: str | os.PathLike[str], *,
                   namespaces: Sequence[str] = (), importance: float = 1.0,
                   use_count: float = 0.0) -> list[dict[str, Any]]:
    """The retention curve ``R(idle days)`` of each policy for a memory of ``importance`` used
    ``use_count`` times, each threshold and the day it is crossed marked.

    Returns one row per curve: label, stability and the day it is forgotten (``inf``: exempt).
    """
    fig, rows = _retention_figure(policies, namespaces, importance, use_count)
    fig.savefig(out, dpi=DPI)
    return rows


def _retention_figure(policies: PolicySet, namespaces: Sequence[str], importance: float,
                      use_count: float) -> tuple[Any, list[dict[str, Any]]]:
    groups = policy_groups(policies, namespaces)
    imp, uses = np.array([importance]), np.array([use_count])
    days = [float(days_until_forgotten(imp, uses, p)[0]) for _, p in groups]
    horizon = 1.3 * max([d for d in days if math.isfinite(d)] or [365.0])
    t = np.linspace(0.0, horizon, 400)
    fig = _figure(8.0, 4.8)
    ax = fig.subplots()
    rows = []
    for (label, policy), day in zip(groups, days):
        # An exempt policy never forgets: its retention stays 1 whatever the idle time.
        r = retention(t, np.full_like(t, importance), np.full_like(t, use_count), policy) \
            if policy.enabled else np.ones_like(t)
        line, = ax.plot(t, r, "-" if policy.enabled else ":",
                        label=label + ("" if policy.enabled else " (exempt)"))
        if policy.enabled:  # an exempt policy has no threshold (it would hide another's)
            ax.axhline(policy.threshold, color=line.get_color(), lw=0.6, ls="--", alpha=0.6)
        if math.isfinite(day):
            ax.plot([day], [policy.threshold], "o", color=line.get_color())
            ax.annotate(f"{day:.0f}d", (day, policy.threshold), textcoords="offset points",
                        xytext=(4, 6), fontsize=8, color=line.get_color())
        rows.append({"label": label, "stability_days": float(stability_days(imp, uses, policy)[0]),
                     "forgotten_after_days": day})
    ax.set_xlabel("idle days (since the last use, or creation)")
    ax.set_ylabel("retention R = exp(-idle / S)")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlim(0.0, horizon)
    ax.set_title(f"Retention per namespace policy (importance {importance:g}, used {use_count:g}x)\n"
                 "dashed: forget threshold; dot: the day it is forgotten", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return fig, rows


def forget_matrix(policy: RetentionPolicy, importance: Sequence[float] = MATRIX_IMPORTANCE,
                  uses: Sequence[float] = MATRIX_USES) -> np.ndarray:
    """Days until forgotten, ``(len(importance), len(uses))``; ``inf`` when exempt."""
    shape = (len(importance), len(uses))
    imp = np.broadcast_to(np.asarray(importance, dtype=np.float64)[:, None], shape)
    use = np.broadcast_to(np.asarray(uses, dtype=np.float64)[None, :], shape)
    return days_until_forgotten(imp, use, policy)


def plot_forget_matrix(policy: RetentionPolicy, out: str | os.PathLike[str], *,
                       title: str = GLOBAL_POLICY) -> np.ndarray:
    """The forget matrix of ``policy``: a heat map of the days until forgotten over importance
    x use count, each cell labelled; returns the matrix."""
    days = forget_matrix(policy)
    fig = _figure(7.5, 5.0)
    ax = fig.subplots()
    shown = np.where(np.isfinite(days), days, np.nan)
    image = ax.imshow(np.log10(np.maximum(shown, 1.0)), cmap="viridis", aspect="auto",
                      origin="lower")
    low, high = image.get_clim()
    for (i, j), value in np.ndenumerate(days):
        text = "never" if not math.isfinite(value) else f"{value:.0f}"
        light = math.isfinite(value) and math.log10(max(value, 1.0)) > low + 0.6 * (high - low)
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="black" if light else "white")
    ax.set_xticks(range(len(MATRIX_USES)), [str(u) for u in MATRIX_USES])
    ax.set_yticks(range(len(MATRIX_IMPORTANCE)), [f"{v:g}" for v in MATRIX_IMPORTANCE])
    ax.set_xlabel("use count")
    ax.set_ylabel("importance (dose, 1 = neutral)")
    ax.set_title(f"Days until forgotten: {title} (threshold {policy.threshold:g}, "
                 f"S0 {policy.half_life_days:g}d)")
    fig.colorbar(image, ax=ax, label="log10 days")
    fig.savefig(out, dpi=DPI)
    return days


# -------------------------------------------------------------------- command line


@dataclass(frozen=True, slots=True)
class PlotCommand:
    """One ``heaprank plot NAME`` subcommand.

    Attributes:
        help: One line for ``--help``.
        add_arguments: Adds this plot's own options (``--state``, ``--config`` and ``--out``
            are common to every plot).
        draw: Draws into ``args.out`` from a reranker opened read-only on ``--state``.
        reads_state: False for a plot that needs a state only when ``--state`` names one (it
            then gets a reranker on an empty in-memory state).
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    draw: Callable[[argparse.Namespace, Reranker], None]
    reads_state: bool = True


def _count(text: str) -> int:
    return whole_number(text, 1)


def _links_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="*", help="a namespace, or * for the pooled layer")
    parser.add_argument("--limit", type=_count, default=20, help="links to draw")
    parser.add_argument("--min-n", type=number, default=0.0, help="only links with this much evidence")


def _draw_links(args: argparse.Namespace, rr: Reranker) -> None:
    known_namespace(rr, args.namespace)
    where = "all namespaces pooled" if args.namespace == "*" else args.namespace
    plot_links(rr.links(args.namespace, min_n=args.min_n), args.out, limit=args.limit,
               title=f"Strongest learned links ({where})")


def _tune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fit-half-life", action="store_true", help="fit the recency half-life too")
    parser.add_argument("--min-impressions", type=_count, default=50,
                        help="a fit needs this many usable impressions")
    parser.add_argument("--max-namespaces", type=_count, default=12,
                        help="draw the namespaces with most impressions, at most this many")


def _draw_tune(args: argparse.Namespace, rr: Reranker) -> None:
    result = rr.tune("*", fit_half_life=args.fit_half_life, min_impressions=args.min_impressions)
    plot_tune(result, args.out, max_namespaces=args.max_namespaces)


def _policy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", help="TOML or JSON retention policy file (default: the "
                        "config's retention.policy, else the built-in one)")
    parser.add_argument("--json", action="store_true", help="print the plotted values as JSON")


def _retention_arguments(parser: argparse.ArgumentParser) -> None:
    _policy_arguments(parser)
    parser.add_argument("--importance", type=float, default=1.0,
                        help="importance dose of the memory drawn (default 1, neutral)")
    parser.add_argument("--uses", type=float, default=0.0,
                        help="use count of the memory drawn (default 0)")


def _policies(args: argparse.Namespace, rr: Reranker) -> PolicySet:
    return load_policy(args.policy) if args.policy else resolve_policy(rr.config.retention.policy)


def _print_values(args: argparse.Namespace, text: str, data: Any) -> None:
    """The plotted values: JSON with ``--json`` (an exempt policy's ``inf`` as null), else
    ``text``."""
    if args.json:
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif text:
        print(text)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _draw_retention(args: argparse.Namespace, rr: Reranker) -> None:
    if not (args.importance > 0 and args.uses >= 0):
        raise InputError(f"--importance must be > 0 and --uses >= 0, got {args.importance:g} "
                         f"and {args.uses:g}")
    rows = plot_retention(_policies(args, rr), args.out, namespaces=rr.state.namespaces(),
                          importance=args.importance, use_count=args.uses)
    _print_values(args, "\n".join(
        f"{r['label']}: S {r['stability_days']:.1f}d, forgotten after "
        f"{r['forgotten_after_days']:.1f} idle days" for r in rows),
        [{**r, "forgotten_after_days": _finite(r["forgotten_after_days"])} for r in rows])


def _matrix_arguments(parser: argparse.ArgumentParser) -> None:
    _policy_arguments(parser)
    parser.add_argument("--namespace", help="draw this namespace's policy (default: the global)")


def _draw_forget_matrix(args: argparse.Namespace, rr: Reranker) -> None:
    policies = _policies(args, rr)
    title = f"namespace {args.namespace!r}" if args.namespace else GLOBAL_POLICY
    days = plot_forget_matrix(policies.for_namespace(args.namespace or ""), args.out, title=title)
    _print_values(args, "", [[_finite(d) for d in row] for row in days.tolist()])


#: ``heaprank plot NAME``: every plot the command line offers, by name.
PLOTS: dict[str, PlotCommand] = {
    "links": PlotCommand("strongest learned links with their 90% intervals", _links_arguments,
                         _draw_links),
    "tune": PlotCommand("fitted weights per namespace with their intervals (runs tune, "
                        "changes nothing)", _tune_arguments, _draw_tune),
    "retention": PlotCommand("the retention curve of each namespace policy, threshold crossing "
                             "marked (--state: counts the namespaces on the global default)",
                             _retention_arguments, _draw_retention, reads_state=False),
    "forget-matrix": PlotCommand("days until forgotten over importance x use count",
                                 _matrix_arguments, _draw_forget_matrix, reads_state=False),
}
