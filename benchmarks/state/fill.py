"""A feedback update built straight from chosen features, for benchmarks that fill a state
without reranking (memory per link, Redis capacity, resharding under writers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def update_of(impression: Any, features: Sequence[Sequence[str]], used: Sequence[bool]) -> Any:
    """The update of a feedback on every shown item of ``impression``: item ``k`` carries
    ``features[k]`` and was used when ``used[k]``; uniform credit (heaprank's rule with
    ``em=False``: no links to read)."""
    from heaprank.model.links import Judged, increments
    from heaprank.records import IGNORED, USED, Update

    inc = increments([Judged(tuple(fs), u, 1.0) for fs, u in zip(features, used)], {}, em=False)
    return Update(impression.recall_id, impression.namespace, impression.time,
                  tuple(range(1, len(used) + 1)), tuple(USED if u else IGNORED for u in used),
                  tuple(d for d, u in zip(impression.ids, used) if u), inc.features, inc.dpos,
                  inc.dneg)
