from typing import Any

def coerce_columns(items: Any, candidate_type: type, reverse: dict[str, int], kinds: bytes,
                   bounds: tuple[tuple[float, float], ...], now: float, latest: float,
                   no_tags: frozenset[str], /) -> tuple[Any, ...] | None: ...
def shape_key(text: str, kind: str | None, source: str | None, prefix_chars: int, /) -> int: ...
def shape_rows(table: bytearray, texts: tuple[str, ...], kinds: tuple[str | None, ...],
               sources: tuple[str | None, ...], prefix_chars: int, names: frozenset[str],
               names_bloom: int, codes: list[int] | None, base: int, words: frozenset[str],
               slot_words: list[frozenset[str]], rows: dict[object, int],
               /) -> tuple[int, bytearray, list[tuple[int, int, int, int]]] | None: ...
