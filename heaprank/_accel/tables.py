"""Compact open-addressing tables of int64 entries, the caches' form for the C kernels.

The shape cache and the row cache of :class:`~heaprank.scoring.space.FeatureSpace` are dicts;
their mirrors here are what ``_features.shape_rows`` reads: one small entry per key, in one
``bytearray``, where a dict lookup from C would cost several pointer hops (index, entry, key
object, value object), on a request path mostly cache misses. Written from Python only (rarely:
a new shape or row), read from C (every rerank).

The buffers hold integers only, never an object's address: Python can write any bytes into a
``bytearray``, so the kernel trusts nothing it reads there. A shape's word set is an index into
:attr:`ShapeTable.words`, a list the kernel receives with the buffer and bounds-checks.
"""

from __future__ import annotations

import numpy as np

_BITS64 = (1 << 64) - 1
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def home(key: int) -> int:
    """Where a key's probe starts (before the mask): splitmix64's finaliser, as ``mix_key`` in
    ``_kernels.h`` computes it. Row keys are ``slot * 2**17 + rest``; homed at ``key & mask``,
    all rows of one question type would share a bucket and every probe would walk one chain."""
    x = key & _BITS64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _BITS64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _BITS64
    return x ^ (x >> 31)


def homes(keys: np.ndarray) -> np.ndarray:
    """:func:`home` of every key of an int64 array at once (uint64 arithmetic wraps as the
    masks above do)."""
    x = keys.astype(np.uint64)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


#: Bits of a word bloom: one per ``hash(word) % 63`` (63 keeps a bloom a non-negative int64).
BLOOM_BITS = 63


def word_bloom(words: frozenset[str]) -> int:
    """One bit per word, ``hash(word) % 63``: two sets with no bit in common share no word."""
    bloom = 0
    for word in words:
        bloom |= 1 << hash(word) % BLOOM_BITS
    return bloom


class OpenTable:
    """Entries of :attr:`WIDTH` int64 columns (the key, then a value stored + 1, so that 0 marks
    an empty entry, then any others), a power of two long and at most half full, with linear
    probing from ``home(key) & mask``."""

    WIDTH = 2
    MIN_SIZE = 1_024

    def __init__(self) -> None:
        self._allot(self.MIN_SIZE)

    def _allot(self, size: int) -> None:
        self.buffer = bytearray(8 * self.WIDTH * size)
        self.entries = np.frombuffer(self.buffer, dtype=np.int64).reshape(size, self.WIDTH)
        self.mask = size - 1
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def clear(self) -> None:
        self._allot(self.MIN_SIZE)

    def _find(self, key: int) -> int:
        """The position of ``key``, or of the empty entry where it would go."""
        entries, mask = self.entries, self.mask
        at = home(key) & mask
        while entries[at, 1] != 0 and entries[at, 0] != key:
            at = (at + 1) & mask
        return at

    def _put(self, key: int, *stored: int) -> None:
        """Set ``key``'s entry to ``stored`` (its value + 1, then the other columns)."""
        if 2 * (self.count + 1) > len(self.entries):
            self._grow()
        at = self._find(key)
        if self.entries[at, 1] == 0:
            self.count += 1
        self.entries[at] = (key, *stored)

    def _grow(self) -> None:
        """Twice the entries, every held one placed again by whole-array passes (growing a
        table of tens of thousands of entries takes a millisecond, where placing them one by
        one took a rerank 100 ms)."""
        live = self.entries[self.entries[:, 1] != 0]
        self._allot(2 * len(self.entries))
        at = (homes(live[:, 0]) & np.uint64(self.mask)).astype(np.int64)
        # By home, each entry goes to its home or right after the one before, whichever is
        # later: an entry only moves past taken places, so its probe finds it.
        order = np.argsort(at, kind="stable")
        step = np.arange(len(order))
        places = np.maximum.accumulate(at[order] - step) + step
        if len(places) and places[-1] > self.mask:  # a run past the end: it wraps around
            self._place_wrapping(live, at)
        else:
            self.entries[places] = live[order]
        self.count = len(live)

    def _place_wrapping(self, live: np.ndarray, at: np.ndarray) -> None:
        """Place ``live`` (probes starting at ``at``) in an empty table, runs wrapping around
        its end: each pass places, per free place, the first entry whose probe stands there,
        and moves the others one step on."""
        pending = np.arange(len(live))
        taken = np.zeros(len(self.entries), dtype=bool)
        while len(pending):
            free = ~taken[at]
            where, first = np.unique(at[free], return_index=True)
            self.entries[where] = live[pending[free][first]]
            taken[where] = True
            keep = np.ones(len(pending), dtype=bool)
            keep[np.flatnonzero(free)[first]] = False
            pending, at = pending[keep], (at[keep] + 1) & self.mask

    def discard(self, key: int) -> None:
        """Remove ``key`` (if held), shifting back the entries its place kept apart from their
        home (linear probing leaves no tombstone)."""
        entries, mask = self.entries, self.mask
        hole = self._find(key)
        if entries[hole, 1] == 0:
            return
        self.count -= 1
        self._forget(entries[hole])
        at = hole
        while True:
            at = (at + 1) & mask
            if entries[at, 1] == 0:
                break
            start = home(int(entries[at, 0])) & mask
            # the entry stays unless its home lies cyclically outside (hole, at]
            if (hole < at and (start <= hole or start > at)) or \
                    (hole > at and start <= hole and start > at):
                entries[hole] = entries[at]
                hole = at
        entries[hole] = 0

    def _forget(self, entry: np.ndarray) -> None:
        """What a subclass keeps beside an entry, dropped with it (nothing here)."""


class ShapeTable(OpenTable):
    """The cached shapes: ``(shape key, slot key + 1, word bloom, index of the word set)``.

    Kept in step with :attr:`FeatureSpace._shapes`, which stays the cache itself (its order is
    the eviction order): an entry is inserted, discarded and cleared with its shape. Its word
    set is held in :attr:`words` at the index the entry stores (a discarded shape's place is
    reused by the next one).
    """

    WIDTH = 4
    #: Bytes per cached shape the table may hold (a quarter full, just grown, and its place in
    #: the list of word sets), which the shape cache's byte bound counts.
    BYTES_PER_SHAPE = 4 * 32 + 100

    def __init__(self) -> None:
        #: The word set of each shape, at the index its entry holds (None: a free place)
        self.words: list[frozenset[str] | None] = []
        self._free: list[int] = []
        super().__init__()

    def clear(self) -> None:
        super().clear()
        self.words, self._free = [], []

    def insert(self, key: int, slot_key: int, words: frozenset[str]) -> None:
        """Hold a shape: its key, slot key and word set."""
        held = self.entries[self._find(key)]
        if held[1] != 0:  # the key again: its place is reused
            self.words[int(held[3])] = words
            self._put(key, slot_key + 1, word_bloom(words), int(held[3]))
            return
        if self._free:
            index = self._free.pop()
            self.words[index] = words
        else:
            index = len(self.words)
            self.words.append(words)
        self._put(key, slot_key + 1, word_bloom(words), index)

    def _forget(self, entry: np.ndarray) -> None:
        index = int(entry[3])
        self.words[index] = None
        self._free.append(index)


class RowTable(OpenTable):
    """The feature rows of the int keys (``(row key, row + 1)``), as :attr:`FeatureSpace._rows`
    holds them; rows are only ever added, and all cleared together."""

    def insert(self, key: int, row: int) -> None:
        self._put(key, row + 1)
