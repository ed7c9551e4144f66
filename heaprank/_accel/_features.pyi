"""The C kernel of the features stage (heaprank/_accel/_features.c)."""

def shape_rows(
    tables: tuple[bytearray, list[frozenset[str] | None], list[frozenset[str]], bytearray,
                  bytearray],
    keys: tuple[int, ...], question: tuple[frozenset[str], int, frozenset[str], int],
    codes: list[int] | None, base: int, /,
) -> tuple[int, bytearray, list[tuple[int, int, int, int]]] | None: ...
