"""Plots of what heaprank learned and tuned: ``pip install 'heaprank[plot]'`` (matplotlib).

Each plot is a function that draws into a PNG file, and an entry of :data:`PLOTS` that the
command line runs as ``heaprank plot NAME --state URL --out FILE.png``: to add a plot, write its
function and register a :class:`PlotCommand` (its own options and how it reads the reranker).
matplotlib is imported only when a plot is drawn, and drawn on a :class:`~matplotlib.figure.Figure`
of its own (no pyplot, no global backend), so plotting is safe in a server process too.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ._optional import require
from .config import Weights

if TYPE_CHECKING:
    from .reranker import Link, Reranker
    from .tuning import TuneFit, TuneResult

DPI = 120


def _figure(width: float, height: float) -> Any:
    figure = require("matplotlib.figure", extra="plot", feature="heaprank plots")
    return figure.Figure(figsize=(width, height), layout="constrained")


def plot_links(links: Sequence[Link], out: str | os.PathLike[str], *, limit: int = 20,
               title: str = "Strongest learned links") -> None:
    """The ``limit`` strongest links (as :meth:`Reranker.links` orders them): P(useful) with its
    90% interval, one row each, labelled with the feature and its evidence ``n``."""
    rows = list(links)[:limit]
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


def plot_tune(result: TuneResult, out: str | os.PathLike[str], *, max_namespaces: int = 12) -> None:
    """The fitted weights of the pooled fit and of each namespace (the ``max_namespaces`` with
    most impressions), each with its approximate 90% interval; the current weights as bars.
    A fit that did not move is drawn hollow; one with too little data to fit is left out."""
    names = [f.name for f in fields(Weights)]
    fits = [result.pooled] + sorted(result.namespaces.values(),
                                    key=lambda f: -f.impressions)[:max_namespaces]
    drawn = [f for f in fits if f.fitted is not None]
    fig = _figure(max(6.0, 1.6 * len(names)), 4.5)
    ax = fig.subplots()
    current = result.start.weights
    ax.bar(range(len(names)), [getattr(current, n) for n in names], width=0.8, color="#dddddd",
           label="current weights")
    width = 0.7 / max(len(drawn), 1)
    for j, fit in enumerate(drawn):
        x = [k - 0.35 + width * (j + 0.5) for k in range(len(names))]
        value = [getattr(fit.fitted, n) for n in names]
        low = [v - fit.intervals.get(n, (v, v))[0] for n, v in zip(names, value)]
        high = [fit.intervals.get(n, (v, v))[1] - v for n, v in zip(names, value)]
        label = _fit_label(fit)
        ax.errorbar(x, value, yerr=[low, high], fmt="o", capsize=3, label=label,
                    markerfacecolor=None if fit.moved else "white")
    if not drawn:
        ax.text(0.5, 0.6, result.fit.reason, ha="center", va="center", wrap=True,
                transform=ax.transAxes)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("weight (exponent)")
    ax.set_title("Fitted weights, 90% intervals")
    ax.legend(fontsize="small", loc="upper left")
    fig.savefig(out, dpi=DPI)


def _fit_label(fit: TuneFit) -> str:
    who = "pooled" if fit.namespace is None else fit.namespace
    state = "moved" if fit.moved else "kept"
    return f"{who} ({fit.impressions} impressions, {state})"


# -------------------------------------------------------------------- command line


@dataclass(frozen=True, slots=True)
class PlotCommand:
    """One ``heaprank plot NAME`` subcommand.

    Attributes:
        help: One line for ``--help``.
        add_arguments: Adds this plot's own options (``--state``, ``--config`` and ``--out``
            are common to every plot).
        draw: Draws into ``args.out`` from a reranker opened read-only on ``--state``.
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    draw: Callable[[argparse.Namespace, Reranker], None]


def _count(text: str) -> int:
    value = int(text)  # argparse reports a ValueError as an invalid value of the option
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _links_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="*", help="a namespace, or * for the pooled layer")
    parser.add_argument("--limit", type=_count, default=20, help="links to draw")
    parser.add_argument("--min-n", type=float, default=0.0, help="only links with this much evidence")


def _draw_links(args: argparse.Namespace, rr: Reranker) -> None:
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


#: ``heaprank plot NAME``: every plot the command line offers, by name.
PLOTS: dict[str, PlotCommand] = {
    "links": PlotCommand("strongest learned links with their 90% intervals", _links_arguments,
                         _draw_links),
    "tune": PlotCommand("fitted weights per namespace with their intervals (runs tune, "
                        "changes nothing)", _tune_arguments, _draw_tune),
}
