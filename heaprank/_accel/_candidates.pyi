"""The C kernel of the candidates stage (heaprank/_accel/_candidates.c)."""

from typing import Any

def coerce_columns(
    items: list[Any] | tuple[Any, ...], slots: tuple[Any, Any, Any, Any],
    reverse: dict[str, int], kinds: bytes, bounds: tuple[tuple[float, float], ...], now: float,
    latest: float, /,
) -> tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...], bytearray, int,
           tuple[tuple[str | None, ...] | None, ...]] | None: ...
