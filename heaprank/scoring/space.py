"""The feature space of one process: feature strings interned as integers, every candidate's
shape cached (never its text), and each candidate's full feature row built once per distinct
(shape, question) pair, so scoring works on an integer matrix with no string work per call.
"""

from __future__ import annotations

import itertools
import operator
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._accel import kernels
from .._accel.tables import RowTable, ShapeTable, word_bloom
from ..model.features import (
    N_STRUCTURE_CODES,
    NO_STRUCTURE,
    STRUCTURE_SLOTS,
    Shape,
    expand_features,
    person_slot,
    shape_of,
    yes,
)
from ..model.questions import _QTYPE_CODE, PERSONS, QueryInfo, QuestionClassifier, analyze_query
from ..model.text import tokens
from .candidates import CandidateBatch

_FEATURES = kernels("features")
#: The feature-rows kernel (``_features.shape_rows``), or None.
shape_rows_kernel: Callable[..., Any] | None = None if _FEATURES is None else _FEATURES.shape_rows

#: Queries up to this many characters have their reading cached (:meth:`FeatureSpace.query`),
#: at most :data:`QUERY_CACHE_ENTRIES` of them: a bounded cache, whatever the queries' size.
QUERY_CACHE_CHARS = 1_000
QUERY_CACHE_ENTRIES = 4_096


#: A cached query reading: the fields of :class:`QueryInfo` after its text.
_QueryReading = tuple[str, frozenset[str], frozenset[str], bool, str, str, tuple[int, int] | None]
#: A cached shape: (slot key, source words, text words, approximate bytes, the shape). The slot
#: key is the slot id times :data:`_SLOT_SCALE`: the first term of a row key, as it is.
_Entry = tuple[int, frozenset[str], frozenset[str], int, Shape]
_SLOT_SCALE = 131072  # > 16 x (question types x structure codes): the rest of a row key
_SLOT_KEY = operator.itemgetter(0)
_SLOTS_OF = operator.itemgetter(1)
_SOURCE_WORDS = operator.itemgetter(1)
_WORDS = operator.itemgetter(2)



class FeatureSpace:
    """Interns feature strings as integers and caches every candidate's features.

    A candidate's shape is cached per (hash of its featurised prefix, kind, source, tags): the
    cache never holds a caller's text, only the shape read from it, and is bounded by bytes
    (``max_bytes``, oldest first out). Its full feature row is cached per (shape,
    question type, relation and neighbour slots) as integer ids, so scoring works on an
    ``(n, n_features)`` integer matrix with no string work per call. Ids are only meaningful
    inside one process; the vocabulary is reset when it outgrows ``max_features``.

    Only the first ``prefix_chars`` characters of a text are featurised, so the cost of a
    candidate does not grow with its size (a 10 MB text costs what its prefix costs).
    """

    def __init__(self, *, max_bytes: int = 64 * 2**20, prefix_chars: int = 2000,
                 max_features: int = 1_000_000, max_rows: int = 200_000) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError("feature_cache_bytes: must be an int >= 0")
        if isinstance(prefix_chars, bool) or not isinstance(prefix_chars, int) or prefix_chars < 1:
            raise ValueError("prefix_chars: must be an int >= 1")
        self.max_bytes = max_bytes
        self.prefix_chars = prefix_chars
        self.max_features = max_features
        self.max_rows = max_rows
        self.names: list[str] = []
        self._ids: dict[str, int] = {}
        self._shapes: dict[int, _Entry] = {}
        self.cached_bytes = 0
        self._rows: dict[object, int] = {}
        self._row_info: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self._matrix = np.zeros((256, 24), dtype=np.intp)
        self._expanded: dict[tuple[object, ...], tuple[str, ...]] = {}
        #: (slots, source words) -> (slot key, those source words): an entry's first two fields
        self._slot_ids: dict[tuple[tuple[str, ...], frozenset[str]],
                             tuple[int, frozenset[str]]] = {}
        #: Per slot id, its source words, and their bloom as an int64 (the C kernel's way from
        #: a slot key to them)
        self._slot_words: list[frozenset[str]] = []
        self._slot_blooms = bytearray()
        #: The cached shapes and the int-keyed rows as the C kernel reads them (None without
        #: the kernel)
        self._table = ShapeTable() if shape_rows_kernel is not None else None
        self._row_table = RowTable() if shape_rows_kernel is not None else None
        self._queries: dict[tuple[object, ...], _QueryReading] = {}
        #: Bumped whenever row and feature ids are reset: what was keyed by them is stale.
        self.generation = 0
        #: Held while the caches change (a shape featurised, a row built, a reset): reranks
        #: in several threads share a feature space. Reads, the C kernel's included, take none.
        self._lock = threading.RLock()

    def clear(self) -> None:
        """Drop every cached shape, row and query reading (``forget_namespace`` calls this:
        the caches may hold names read from that namespace's candidates and queries)."""
        with self._lock:
            self._reset_rows()
        self._expanded.clear()
        self._queries.clear()

    def query(self, query: str, classify: QuestionClassifier) -> QueryInfo:
        """:func:`analyze_query`, cached for queries of at most :data:`QUERY_CACHE_CHARS`
        characters (agents re-ask the same questions). Keyed like the shape cache by a hash of
        the query, so the cache holds what was read from a query, never the query itself."""
        if len(query) > QUERY_CACHE_CHARS:
            return analyze_query(query, classify)
        key = (hash(query), len(query), classify)
        hit = self._queries.get(key)
        if hit is None:
            info = analyze_query(query, classify)
            if len(self._queries) >= QUERY_CACHE_ENTRIES:
                self._queries.clear()
            self._queries[key] = (info.qtype, info.names, info.words, info.has_content,
                                  info.person, info.intent, info.blooms)
            return info
        return QueryInfo(query, *hit)

    def _intern(self, features: Sequence[str]) -> tuple[int, ...]:
        ids = self._ids
        out = []
        for f in features:
            i = ids.get(f)
            if i is None:
                i = ids[f] = len(self.names)
                self.names.append(f)
            out.append(i)
        return tuple(out)

    def _new_shape(self, key: int, prefix: str, kind: str | None,
                   source: str | None, tags: frozenset[str],
                   tag_slots: tuple[str, ...]) -> _Entry:
        """Featurise a prefix not seen yet and cache it (oldest entries out past the bound)."""
        shape = shape_of(prefix, kind, source, tags, tag_slots)
        source_words = frozenset(t.casefold() for t in tokens(source)) if source else frozenset()
        # Approximate bytes held: the entry, its word set, and the words themselves.
        cost = 400 + 60 * (len(shape.words) + len(source_words)) \
            + sum(map(len, shape.words)) + (len(source) if source else 0)
        table = self._table
        if table is not None:
            cost += ShapeTable.BYTES_PER_SHAPE
        # Shapes with the same slots (most of them) share one id, so their feature rows are
        # built once and stay few however many texts pass through.
        # Keyed by the source's words too: sources ``None`` and ``"none"`` share the slot
        # ``source:none`` but not whether a question names them. The shapes of a slot key
        # share one object of its source words (one place for a rerank to read, not many).
        slot = self._slot_ids.get((shape.slots, source_words))
        if slot is None:
            slot = self._slot_ids[(shape.slots, source_words)] = (
                len(self._slot_ids) * _SLOT_SCALE, source_words)
            self._slot_words.append(source_words)
            self._slot_blooms += word_bloom(source_words).to_bytes(8, sys.byteorder)
        entry = (*slot, shape.words, cost, shape)
        if cost <= self.max_bytes:
            self._shapes[key] = entry
            self.cached_bytes += cost
            if table is not None:
                table.insert(key, slot[0], shape.words)
            while self.cached_bytes > self.max_bytes:  # first in, first out: no per-hit cost
                oldest = next(iter(self._shapes))
                self.cached_bytes -= self._shapes.pop(oldest)[3]
                if table is not None:
                    table.discard(oldest)
        return entry

    def rows(self, query: QueryInfo, batch: CandidateBatch, *,
             structure: list[int] | None, tag_slots: tuple[str, ...],
             doc_features: bool, speaker_roles: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(distinct, of)``: the distinct feature rows of the batch's candidates for this
        query (rows of :meth:`matrix`), and for each candidate the position of its row among
        them. ``structure`` holds each candidate's structure code (its neighbour and
        first-stage slots, :data:`~heaprank.model.features.STRUCTURE_SLOTS`); ``None``
        means none of either. ``speaker_roles`` adds the ``person:`` slot."""
        if self._over_bounds():
            with self._lock:
                if self._over_bounds():
                    self._reset_rows()
        # 0: no person slot; else 1 + the question's person. The role comes with the source,
        # which the shape (and so its slot id) already fixes.
        person = 1 + PERSONS.index(query.person) if speaker_roles else 0
        if shape_rows_kernel is not None and self._table is not None and not doc_features \
                and not tag_slots:
            # reads only (one C call: atomic under the GIL), so no lock: the usual case
            done = self._rows_kernel(query, batch, structure, person)
            if done is not None:
                return done
        with self._lock:  # featurises and caches: one thread at a time
            return self._rows_python(query, batch, tag_slots, doc_features, structure, person)

    def _over_bounds(self) -> bool:
        return len(self.names) > self.max_features or len(self._rows) > self.max_rows \
            or len(self._slot_ids) > self.max_rows

    def _rows_python(self, query: QueryInfo, batch: CandidateBatch, tag_slots: tuple[str, ...],
                     doc_features: bool, structure: list[int] | None,
                     person: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rows` in Python (the caller holds the lock)."""
        sources = batch.sources
        entries = self._entries(batch.texts, batch.kinds, sources, batch.tags, tag_slots)
        if doc_features:
            return self._rows_one_by_one(query, batch.ids, sources, entries, doc_features,
                                         structure, person)
        # The row key of every candidate at once: one int per (shape, question type, relation,
        # neighbour and person slots). The per-candidate work is C-level maps; Python runs per
        # distinct row only. Whether the question names the source (qsrc) is added per
        # distinct key: the slot key fixes the source's words, so it cannot split a group.
        # (Python ints, not numpy: on a few dozen candidates each numpy call costs more than
        # the arithmetic, and more again with cold caches.)
        # Layout: slot key (slot id x _SLOT_SCALE) + 16 x (question type x N_STRUCTURE_CODES
        # + structure code) + 4 x person + 2 x (the question does not name the source) + (no shared name),
        # so that both flags add as the bools ``isdisjoint`` returns.
        base = (_QTYPE_CODE[query.qtype] * N_STRUCTURE_CODES) * 16 + 4 * person
        if query.names:
            keys = list(map(operator.add, map(_SLOT_KEY, entries), map(
                query.names.isdisjoint, map(_WORDS, entries))))
        else:
            keys = list(map(_SLOT_KEY, entries))
            base += 1
        if structure is None:
            base += 16 * NO_STRUCTURE
        else:
            keys = list(map(operator.add, keys, map(operator.mul, structure,
                                                    itertools.repeat(16))))
        # Each distinct key (in order of first appearance) -> one entry of its candidates:
        # every candidate of a key has the same row, so any of them stands for it.
        some = dict(zip(keys, entries))
        local = dict(zip(some, itertools.count()))
        full = list(map(operator.add, some, map((base, base + 2).__getitem__, map(
            query.words.isdisjoint, map(_SOURCE_WORDS, some.values())))))
        distinct = list(map(self._rows.get, full))
        if None in distinct:  # rows not built yet
            for j, (key, entry) in enumerate(some.items()):
                if distinct[j] is None:
                    i = keys.index(key)
                    distinct[j] = self._new_row(
                        full[j], query, entry, None,
                        STRUCTURE_SLOTS[NO_STRUCTURE if structure is None else structure[i]],
                        sources[i], bool(person))
        # One array for both (one numpy call less: each costs ~1 us with cold caches).
        both = np.fromiter(itertools.chain(distinct, map(local.__getitem__, keys)),
                           dtype=np.intp, count=len(distinct) + len(keys))
        return both[:len(distinct)], both[len(distinct):]

    def _rows_kernel(self, query: QueryInfo, batch: CandidateBatch,
                     structure: list[int] | None,
                     person: int) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`rows` by the C kernel (``_features.shape_rows``) when every candidate's shape
        is cached (no tag slots or document features), or None: the Python path then runs,
        and featurises the new shapes. The same row keys as that path, in one C pass."""
        assert shape_rows_kernel is not None and self._table is not None \
            and self._row_table is not None
        codes = structure
        base = (_QTYPE_CODE[query.qtype] * N_STRUCTURE_CODES) * 16 + 4 * person
        if not query.names:
            base += 1
        if structure is None:
            base += 16 * NO_STRUCTURE
        blooms = query.blooms
        if blooms is None:
            blooms = (word_bloom(query.names), word_bloom(query.words))
        table = self._table
        tables = (table.buffer, table.words, self._slot_words, self._slot_blooms,
                  self._row_table.buffer)
        sources = batch.sources
        done = shape_rows_kernel(tables, self.shape_keys(batch.texts, batch.kinds, sources),
                                 (query.names, blooms[0], query.words, blooms[1]), codes, base)
        if done is None:
            return None
        d, both, missing = done
        rows = np.frombuffer(both, dtype=np.intp)
        if missing:  # rows not built yet: their shapes are cached
            rows = rows.copy()
            with self._lock:
                for j, full, i, shape_key in missing:
                    built = self._rows.get(full)  # by another thread since, maybe
                    if built is None:
                        entry = self._shapes.get(shape_key)
                        if entry is None:
                            return None  # evicted since: the Python pass featurises it again
                        built = self._new_row(
                            full, query, entry, None,
                            STRUCTURE_SLOTS[NO_STRUCTURE if structure is None
                                            else structure[i]], sources[i], bool(person))
                    rows[j] = built
        return rows[:d], rows[d:]

    def shape_keys(self, texts: Sequence[str], kinds: Sequence[str | None],
                   sources: Sequence[str | None]) -> tuple[int, ...]:
        """Each candidate's shape key without tag slots, ``hash((prefix, kind, source))``: the
        key :meth:`_entries` caches its shape under (C-level maps, one pass each)."""
        prefixes = map(operator.itemgetter(slice(self.prefix_chars)), texts)
        return tuple(map(hash, zip(prefixes, kinds, sources)))

    def _entries(self, texts: Sequence[str], kinds: Sequence[str | None],
                 sources: Sequence[str | None], tags: Sequence[frozenset[str]],
                 tag_slots: tuple[str, ...]) -> list[_Entry]:
        """Each candidate's cached shape entry, featurising the prefixes not seen yet."""
        prefixes = list(map(operator.itemgetter(slice(self.prefix_chars)), texts))
        # One int per shape (a hash of the prefix and the shape fields): one comparison per
        # cache hit, and no text kept. Tags shape nothing without tag slots: three fields
        # hashed then, five otherwise.
        if tag_slots:
            skeys = list(map(hash, zip(prefixes, kinds, sources, tags,
                                       itertools.repeat(tag_slots))))
        else:
            skeys = list(map(hash, zip(prefixes, kinds, sources)))
        entries = list(map(self._shapes.get, skeys))
        if None in entries:
            get = self._shapes.get
            for i, entry in enumerate(entries):
                if entry is None:
                    entries[i] = get(skeys[i]) or self._new_shape(
                        skeys[i], prefixes[i], kinds[i], sources[i], tags[i], tag_slots)
        return entries  # type: ignore[return-value]  # no None left

    def _rows_one_by_one(self, query: QueryInfo, ids: Sequence[str],
                         sources: Sequence[str | None], entries: list[_Entry],
                         doc_features: bool, structure: list[int] | None,
                         person: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rows` for document features and unusual neighbour slots: a tuple key per
        candidate."""
        qnames, qwords = query.names, query.words
        rows_get = self._rows.get
        distinct: dict[int, int] = {}
        out = []
        for i, entry in enumerate(entries):
            qsrc = not qwords.isdisjoint(entry[1])
            qent = not qnames.isdisjoint(entry[2])
            nbr = STRUCTURE_SLOTS[NO_STRUCTURE if structure is None else structure[i]]
            doc_id = ids[i] if doc_features else None
            key = (entry[0], query.qtype, qsrc, qent, nbr, person, doc_id)
            row = rows_get(key)
            if row is None:
                row = self._new_row(key, query, entry, doc_id, nbr, sources[i], bool(person))
            local = distinct.get(row)
            if local is None:
                local = distinct[row] = len(distinct)
            out.append(local)
        return np.fromiter(distinct, dtype=np.intp, count=len(distinct)), \
            np.array(out, dtype=np.intp)

    def _new_row(self, key: object, query: QueryInfo, entry: _Entry, doc_id: str | None,
                 nbr: tuple[str, ...], source: str | None, person: bool) -> int:
        """Add the row of a candidate's shape ``entry`` for this query; ``person`` adds the
        slot of the question's person x the role of ``source``."""
        qsrc = not query.words.isdisjoint(entry[1])
        qent = not query.names.isdisjoint(entry[2])
        slots = entry[4].slots + (f"qsrc:{yes(qsrc)}", f"qent:{yes(qent)}") + nbr
        if person:
            slots = slots + (person_slot(query.person, source),)
        return self._add_row(key, slots, expand_features(query.qtype, slots, doc_id))

    def _add_row(self, key: object, slots: tuple[str, ...],
                 feats: tuple[str, ...]) -> int:
        row = len(self._row_info)
        ids = self._intern(feats)
        if row >= self._matrix.shape[0] or len(ids) > self._matrix.shape[1]:
            grown = np.zeros((max(2 * self._matrix.shape[0], row + 1),
                              max(self._matrix.shape[1], len(ids))), dtype=np.intp)
            grown[:self._matrix.shape[0], :self._matrix.shape[1]] = self._matrix
            self._matrix = grown
        self._matrix[row, :len(ids)] = ids
        self._row_info.append((feats, slots))
        self._rows[key] = row
        if self._row_table is not None and type(key) is int:
            self._row_table.insert(key, row)
        return row

    def _reset_rows(self) -> None:
        self.generation += 1  # row and feature ids are about to be reused
        self.names.clear()
        self._ids.clear()
        self._rows.clear()
        self._row_info.clear()
        self._shapes.clear()  # their slot ids go with the rows
        self._slot_ids.clear()
        self._slot_words.clear()
        self._slot_blooms.clear()
        if self._table is not None:
            self._table.clear()
        if self._row_table is not None:
            self._row_table.clear()
        self.cached_bytes = 0

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The ``(len(rows), width)`` feature-id matrix of rows :meth:`rows` returned in one
        call (every row of one call has the same width)."""
        width = len(self._row_info[int(rows[0])][0]) if len(rows) else 0
        return self._matrix[rows, :width]

    def expand(self, qtype: str, slots: tuple[str, ...], doc_id: str | None) -> tuple[str, ...]:
        """:func:`expand_features`, cached (feedback rebuilds the same rows over and over)."""
        key = (qtype, slots, doc_id)
        out = self._expanded.get(key)
        if out is None:
            if len(self._expanded) > self.max_rows:
                self._expanded.clear()
            out = self._expanded[key] = expand_features(qtype, slots, doc_id)
        return out

    def names_of(self, row: int) -> tuple[str, ...]:
        """The feature strings of a row that :meth:`rows` returned."""
        return self._row_info[row][0]

    def slots_of(self, row: int) -> tuple[str, ...]:
        """The slots a row was built from (what an impression stores)."""
        return self._row_info[row][1]

    def slots_of_rows(self, rows: list[int]) -> tuple[tuple[str, ...], ...]:
        """:meth:`slots_of` each row, by C-level maps."""
        return tuple(map(_SLOTS_OF, map(self._row_info.__getitem__, rows)))

