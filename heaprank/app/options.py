"""What the command line and its plots share: option types with plain messages, the legend of
the feature names ``heaprank links`` prints, and the printed form of a weight fit."""

from __future__ import annotations

import argparse
from typing import Any

from .._time import DAY_S
from ..errors import InputError


def whole_number(text: str, low: int = 0) -> int:
    """``text`` as an int >= ``low``; argparse prints the message after the option's name."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
    return value


def number(text: str, low: float = 0.0) -> float:
    """``text`` as a float >= ``low`` (not nan), with a message argparse prints as is."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= {low:g}, got {text!r}") from None
    if not value >= low:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be >= {low:g}, got {text}")
    return value


def known_namespace(rr: Any, namespace: str | None) -> None:
    """Refuse a namespace the state has never seen (a typo would print an empty answer); ``*``
    and ``None`` (the pooled layer) always exist. The others are not listed: tenants stay apart."""
    if namespace not in (None, "*") and namespace not in rr.state.namespaces():
        raise InputError(f"--namespace: {namespace!r} has nothing in this state (heaprank stats "
                         "--json lists the namespaces it holds)")


#: What the feature names of ``heaprank links`` mean (docs/design.md has the full rules).
FEATURES = """feature names: a shape of the memory or its relation to the question, never its words
  kind:fact, source:user   the memory's kind and source (none when absent)
  len:<=10                 its length in words, bucketed
  date:, num:, ent:, q:    it has a date, a number, a name; it is itself a question (yes|no)
  qsrc:yes                 the question names the memory's source or speaker
  qent:yes                 a name from the question appears in the memory
  prev:, next:             how high the retriever placed the turn before / after it
  tag:<t>, person:<p>/<r>  a tag listed in Config.features.tag_slots; question person x speaker role
  qt:when&date:yes         a slot crossed with the question type (when, who, howmany, ...)
  doc:<id>                 this very document (Config.features.doc_features)"""


def print_fit(fit: Any, start: Any) -> None:
    """What ``heaprank tune`` prints of a fit: its data, each weight before and after with its
    interval, the held-out check and whether the weights moved."""
    who = "pooled (all namespaces)" if fit.namespace is None else f"namespace {fit.namespace!r}"
    print(f"{who}: {fit.impressions} usable impressions ({fit.choices} used items), "
          f"{fit.heldout_impressions} held out")
    if fit.fitted is not None:
        rows = [(n, getattr(start.weights, n), getattr(fit.fitted, n), *fit.intervals[n])
                for n in fit.intervals if n != "half_life_s"]
        if "half_life_s" in fit.intervals:  # shown in days
            low, high = fit.intervals["half_life_s"]
            rows.append(("half-life d", start.retention.half_life_s / DAY_S,
                         fit.fitted_half_life_s / DAY_S, low / DAY_S, high / DAY_S))
        print(f"  {'weight':<12} {'current':>8} {'fitted':>8}   90% interval")
        for name, before, after, low, high in rows:
            print(f"  {name:<12} {before:8.3f} {after:8.3f}   {low:.3f}-{high:.3f}")
    if fit.heldout_loglik_before is not None:
        print(f"  held-out log-likelihood per choice {fit.heldout_loglik_before:.4f} -> "
              f"{fit.heldout_loglik_after:.4f}; MRR {fit.heldout_mrr_before:.4f} -> "
              f"{fit.heldout_mrr_after:.4f}")
    print(f"  {'moved' if fit.moved else 'not moved'}: {fit.reason}")
