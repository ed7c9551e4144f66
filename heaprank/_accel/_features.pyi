"""The C kernels of the features stage (heaprank/_accel/_features.c)."""

def shape_key(text: str, kind: str | None, source: str | None, prefix_chars: int,
              /) -> int | None: ...
def shape_rows(
    tables: tuple[bytearray, list[frozenset[str] | None], list[frozenset[str]], bytearray,
                  bytearray, dict[object, int], int],
    texts: tuple[str, ...], kinds: tuple[str | None, ...], sources: tuple[str | None, ...],
    question: tuple[frozenset[str], int, frozenset[str], int], codes: list[int] | None,
    base: int, /,
) -> tuple[int, bytearray, list[tuple[int, int, int, int]]] | None: ...
