"""Views of a retention policy (the ``plot`` extra, matplotlib): the retention curve of each
namespace's policy, and the forget matrix (days until forgotten over importance x use count).

Figures are drawn on a :class:`matplotlib.figure.Figure` directly, never through pyplot's global
state, so plotting works in any process, with or without a display.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._optional import require
from .retention import PolicySet, RetentionPolicy, days_until_forgotten, retention, stability_days

#: Rows and columns of the forget matrix: importance doses (1 is neutral) and use counts.
MATRIX_IMPORTANCE = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)
MATRIX_USES = (0, 1, 2, 5, 10, 20, 50, 100)
GLOBAL_LABEL = "global default"


def _figure(width: float, height: float) -> Any:
    figure = require("matplotlib.figure", extra="plot", feature="heaprank plot")
    return figure.Figure(figsize=(width, height), dpi=110, layout="constrained")


def policy_groups(policies: PolicySet, namespaces: Sequence[str] = ()
                  ) -> list[tuple[str, RetentionPolicy]]:
    """One ``(label, policy)`` per distinct policy: the global default (with how many of
    ``namespaces`` follow it) and each namespace with overrides, in file order."""
    following = [ns for ns in namespaces if ns not in policies.namespaces]
    label = GLOBAL_LABEL + (f" ({len(following)} namespaces)" if namespaces else "")
    return [(label, policies.default)] + [(ns, policies.for_namespace(ns))
                                          for ns in policies.namespaces]


def plot_retention(policies: PolicySet, out: str | os.PathLike[str], *,
                   namespaces: Sequence[str] = (), importance: float = 1.0,
                   use_count: float = 0.0) -> list[dict[str, Any]]:
    """Draw the retention curve ``R(idle days)`` of each policy for a memory of ``importance``
    used ``use_count`` times, each threshold and the day it is crossed marked, into ``out``.

    Returns one row per curve: label, stability and the day it is forgotten (``inf``: exempt).
    """
    groups = policy_groups(policies, namespaces)
    imp, uses = np.array([importance]), np.array([use_count])
    days = [float(days_until_forgotten(imp, uses, p)[0]) for _, p in groups]
    horizon = 1.3 * max([d for d in days if math.isfinite(d)] or [365.0])
    t = np.linspace(0.0, horizon, 400)
    fig = _figure(8.0, 4.8)
    ax = fig.subplots()
    rows = []
    for (label, policy), day in zip(groups, days):
        r = retention(t, np.full_like(t, importance), np.full_like(t, use_count), policy)
        style = "-" if policy.enabled else ":"
        line, = ax.plot(t, r, style, label=label + ("" if policy.enabled else " (exempt)"))
        ax.axhline(policy.threshold, color=line.get_color(), lw=0.6, ls="--", alpha=0.6)
        if math.isfinite(day):
            ax.plot([day], [policy.threshold], "o", color=line.get_color())
            ax.annotate(f"{day:.0f}d", (day, policy.threshold), textcoords="offset points",
                        xytext=(4, 6), fontsize=8, color=line.get_color())
        stability = float(stability_days(imp, uses, policy)[0])
        rows.append({"label": label, "stability_days": stability, "forgotten_after_days": day})
    ax.set_xlabel("idle days (since the last use, or creation)")
    ax.set_ylabel("retention R = exp(-idle / S)")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlim(0.0, horizon)
    ax.set_title(f"Retention per namespace policy (importance {importance:g}, used {use_count:g}x)\n"
                 "dashed: forget threshold; dot: the day it is forgotten", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.savefig(out)
    return rows


def forget_matrix(policy: RetentionPolicy, importance: Sequence[float] = MATRIX_IMPORTANCE,
                  uses: Sequence[float] = MATRIX_USES) -> np.ndarray:
    """Days until forgotten, ``(len(importance), len(uses))``; ``inf`` when exempt."""
    imp = np.asarray(importance, dtype=np.float64)[:, None]
    use = np.asarray(uses, dtype=np.float64)[None, :]
    return days_until_forgotten(np.broadcast_to(imp, (imp.shape[0], use.shape[1])),
                                np.broadcast_to(use, (imp.shape[0], use.shape[1])), policy)


def plot_forget_matrix(policy: RetentionPolicy, out: str | os.PathLike[str], *,
                       title: str = GLOBAL_LABEL) -> np.ndarray:
    """Draw the forget matrix of ``policy`` (a heat map with each cell's days) into ``out``;
    returns the matrix."""
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
    fig.savefig(out)
    return days
