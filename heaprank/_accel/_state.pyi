"""The C kernels of the state stage (heaprank/_accel/_state.c)."""

from typing import Any

def encode_items(
    ids: tuple[str, ...], slots: tuple[tuple[str, ...], ...], rows: dict[tuple[str, ...], bytes],
    signals: Any, m: int, /
) -> bytes | None: ...
def doc_stats(docs: dict[str, tuple[float, float]], ids: tuple[str, ...], /) -> bytearray | None: ...
