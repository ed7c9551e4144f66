"""One generation of a :class:`~heaprank.scoring.space.FeatureSpace`: its feature ids, rows,
slot ids and cached shapes, which only have a meaning together.

A reset (``forget_namespace``, or a cache over its bounds) never clears a generation in place:
the feature space swaps in a new one, and a rerank keeps reading the names, slots and matrix of
the generation its rows came from. So a reset in one thread is invisible to a rerank in
another: it reads the names it started with, never another generation's under the same ids.

Every generation counts the bytes it holds (:attr:`Generation.vocab_bytes` for its names, rows
and slots, :attr:`Generation.shape_bytes` for its shapes), which the feature space holds to its
byte bound.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence

import numpy as np

from .._accel.tables import RowTable, ShapeTable, word_bloom
from ..model.features import Shape

#: A cached shape: (slot key, source words, text words, bytes counted, the shape). The slot key
#: is the slot id times :data:`SLOT_SCALE`: the first term of a row key, as it is.
Entry = tuple[int, frozenset[str], frozenset[str], int, Shape]
SLOT_SCALE = 131072  # > 16 x (question types x structure codes): the rest of a row key

_SLOTS_OF = operator.itemgetter(1)
_size = sys.getsizeof
#: Bytes of a dict or list entry beside its key and value objects (hash, pointers, and the free
#: room a hash table keeps), and of an int object (an id, a row, a key).
_ENTRY = 48
_INT = 32
#: Bytes a row holds beside its features' strings: its key and number in a dict and a table
#: (an int64 entry pair in a table at most half full, just grown: 64), its row_info tuple.
_ROW = _ENTRY + 2 * _INT + 64 + 64
#: Bytes of the slots a row adds to its shape's (relation, neighbour and person slots)
_ROW_SLOTS = 4 * 64


def strings_bytes(strings: Sequence[str] | frozenset[str]) -> int:
    """The bytes of a tuple or set of strings and of the strings themselves."""
    return _size(strings) + sum(map(_size, strings))


class Generation:
    """The feature ids, rows, slot ids and shapes of one generation (see the module docstring).

    Written only under the feature space's lock, and only while it is the space's current
    generation; read by any thread holding it, without a lock (entries are only ever added
    while it is current, and a reset replaces it instead of clearing it).
    """

    def __init__(self, number: int, *, tables: bool) -> None:
        self.number = number
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.rows: dict[object, int] = {}
        self.row_info: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self.matrix = np.zeros((256, 24), dtype=np.intp)
        self.shapes: dict[int, Entry] = {}
        #: (slots, source words) -> (slot key, those source words): an entry's first two fields
        self.slot_ids: dict[tuple[tuple[str, ...], frozenset[str]],
                            tuple[int, frozenset[str]]] = {}
        #: Per slot id, its source words, and their bloom as an int64 (the C kernel's way from
        #: a slot key to them)
        self.slot_words: list[frozenset[str]] = []
        self.slot_blooms = bytearray()
        #: The cached shapes and the int-keyed rows as the C kernel reads them (None without
        #: the kernel)
        self.table = ShapeTable() if tables else None
        self.row_table = RowTable() if tables else None
        #: Bytes held by the names, rows and slot ids (the matrix's growth included), and by
        #: the cached shapes
        self.vocab_bytes = 0
        self.shape_bytes = 0

    @property
    def held_bytes(self) -> int:
        """The bytes this generation counts: its vocabulary's and its shapes'."""
        return self.vocab_bytes + self.shape_bytes

    def slot(self, slots: tuple[str, ...], source_words: frozenset[str]) -> tuple[int, frozenset[str]]:
        """The slot key of these slots and source words (shapes with the same slots share one,
        so that their feature rows are built once), a new one if need be."""
        slot = self.slot_ids.get((slots, source_words))
        if slot is None:
            slot = self.slot_ids[(slots, source_words)] = (
                len(self.slot_ids) * SLOT_SCALE, source_words)
            self.slot_words.append(source_words)
            self.slot_blooms += word_bloom(source_words).to_bytes(8, sys.byteorder)
            self.vocab_bytes += 2 * _ENTRY + _INT + 8 + strings_bytes(slots) \
                + strings_bytes(source_words)
        return slot

    def intern(self, features: Sequence[str]) -> tuple[int, ...]:
        """The ids of these feature names, new ones added."""
        ids = self.ids
        out = []
        for f in features:
            i = ids.get(f)
            if i is None:
                i = ids[f] = len(self.names)
                self.names.append(f)
                self.vocab_bytes += _size(f) + 2 * _ENTRY + _INT
            out.append(i)
        return tuple(out)

    def add_row(self, key: object, slots: tuple[str, ...], feats: tuple[str, ...]) -> int:
        """Add the row of these features under ``key``: its number."""
        row = len(self.row_info)
        ids = self.intern(feats)
        names = self.names
        feats = tuple(map(names.__getitem__, ids))  # the interned strings: one copy of each
        matrix = self.matrix
        if row >= matrix.shape[0] or len(ids) > matrix.shape[1]:
            grown = np.zeros((max(2 * matrix.shape[0], row + 1),
                              max(matrix.shape[1], len(ids))), dtype=np.intp)
            grown[:matrix.shape[0], :matrix.shape[1]] = matrix
            self.vocab_bytes += grown.nbytes - matrix.nbytes
            self.matrix = matrix = grown
        matrix[row, :len(ids)] = ids
        self.row_info.append((feats, slots))
        self.rows[key] = row
        if self.row_table is not None and type(key) is int:
            self.row_table.insert(key, row)
        # (the slot strings are the shape's but for the row's few own: counted with it)
        self.vocab_bytes += _ROW + _size(feats) + _size(slots) + _ROW_SLOTS \
            + (0 if type(key) is int else _size(key))
        return row

    def matrix_of(self, rows: np.ndarray) -> np.ndarray:
        """The ``(len(rows), width)`` feature-id matrix of rows returned in one call (every row
        of one call has the same width)."""
        width = len(self.row_info[int(rows[0])][0]) if len(rows) else 0
        return self.matrix[rows, :width]

    def names_of(self, row: int) -> tuple[str, ...]:
        """The feature names of a row."""
        return self.row_info[row][0]

    def slots_of(self, row: int) -> tuple[str, ...]:
        """The slots a row was built from (what an impression stores)."""
        return self.row_info[row][1]

    def slots_of_rows(self, rows: list[int]) -> tuple[tuple[str, ...], ...]:
        """:meth:`slots_of` each row, by C-level maps."""
        return tuple(map(_SLOTS_OF, map(self.row_info.__getitem__, rows)))
