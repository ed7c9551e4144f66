"""The C kernel of the candidates stage (heaprank/_accel/_candidates.c)."""

from typing import Any

def coerce_columns(
    items: list[Any] | tuple[Any, ...], candidate_type: type, reverse: dict[str, int],
    kinds: bytes, bounds: tuple[tuple[float, float], ...], now: float, latest: float,
    no_tags: frozenset[str], /,
) -> tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...], bytearray, int,
           tuple[tuple[Any, ...] | bytearray | None, ...]] | None: ...
