"""The C kernels of the feedback stage (heaprank/_accel/_feedback.c)."""

from collections.abc import Sequence
from typing import Any

def learn_known(rows: Sequence[bytes], weights: Sequence[float], means: Sequence[Any],
                fids: Any, pos: Any, neg: Any, gpos: Any, gneg: Any, /) -> bool: ...
def shown_rows(
    ids: tuple[str, ...], slots: tuple[tuple[str, ...], ...], used: set[str] | frozenset[str],
    by_slots: dict[int, tuple[tuple[str, ...], str, Any, bytes]], qtype: str,
    weights: Sequence[float], /,
) -> tuple[list[bytes], list[float], list[Any], list[int], bytes] | None: ...
