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
from typing import Any, NamedTuple

import numpy as np

from .._accel import kernels
from .._accel.tables import RowTable, ShapeTable, word_bloom
from ..model.features import (
    N_STRUCTURE_CODES,
    NO_STRUCTURE,
    STRUCTURE_SLOTS,
    expand_features,
    person_slot,
    person_slotted,
    shape_of,
    yes,
)
from ..model.questions import _QTYPE_CODE, PERSONS, QueryInfo, QuestionClassifier, analyze_query
from ..model.text import tokens
from .candidates import CandidateBatch
from .generation import Entry, Generation, strings_bytes

_size = sys.getsizeof

_FEATURES = kernels("features")
#: The feature-rows kernel (``_features.shape_rows``), or None.
shape_rows_kernel: Callable[..., Any] | None = None if _FEATURES is None else _FEATURES.shape_rows

#: Queries up to this many characters have their reading cached (:meth:`FeatureSpace.query`),
#: at most :data:`QUERY_CACHE_ENTRIES` of them: a bounded cache, whatever the queries' size.
QUERY_CACHE_CHARS = 1_000
QUERY_CACHE_ENTRIES = 4_096


#: A cached query reading: the fields of :class:`QueryInfo` after its text.
_QueryReading = tuple[str, frozenset[str], frozenset[str], bool, str, str, tuple[int, int] | None]
_SLOT_KEY = operator.itemgetter(0)
_SOURCE_WORDS = operator.itemgetter(1)
_WORDS = operator.itemgetter(2)
#: Shares of the byte bound: the query readings and the feedback's expanded rows each hold at
#: most ``max_bytes // _SIDE_SHARE``; a generation's vocabulary is reset past half the rest.
_SIDE_SHARE = 16


#: The shape slots a call asks for beyond the fixed ones: its tag slots and its answer-type
#: families.
ExtraSlots = tuple[tuple[str, ...], tuple[str, ...]]


class FeatureRows(NamedTuple):
    """What :meth:`FeatureSpace.feature_rows` returns: the distinct rows, each candidate's
    position among them, and the generation they belong to (whose names, slots and matrix
    they index, whatever reset comes after)."""

    distinct: np.ndarray
    of: np.ndarray
    generation: Generation


class FeatureSpace:
    """Interns feature strings as integers and caches every candidate's features.

    A candidate's shape is cached per (hash of its featurised prefix, kind, source, tags): the
    cache never holds a caller's text, only the shape read from it. Its full feature row is
    cached per (shape, question type, relation and neighbour slots) as integer ids, so scoring
    works on an ``(n, n_features)`` integer matrix with no string work per call. Ids are only
    meaningful inside one process and one :class:`~heaprank.scoring.generation.Generation`.

    ``max_bytes`` bounds what the caches hold, counted as they hold it: the feature names, rows
    and slot ids (with the id matrix's growth), the shapes, the query readings and the rows
    feedback expands. Shapes are evicted oldest first to stay within it; once the names, rows
    and slots take more than half of it (or ``max_features`` names, ``max_rows`` rows) the next
    call starts a new generation. So between calls the caches hold at most ``max_bytes`` plus
    what the last call added, besides the fixed ~100 KB of an empty generation's tables.

    A reset swaps in a new generation and never clears one in place: a rerank in another
    thread keeps reading the generation its rows came from (:class:`FeatureRows`).

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
        #: Whether generations keep the C kernel's tables (a test turns them off)
        self._tables = shape_rows_kernel is not None
        self._gen = Generation(0, tables=self._tables)
        #: The bound of each side cache (query readings, expanded rows), and of a generation
        self._side_bytes = max_bytes // _SIDE_SHARE
        self._gen_bytes = max_bytes - 2 * self._side_bytes
        self._expanded: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._expanded_bytes = 0
        self._queries: dict[tuple[object, ...], _QueryReading] = {}
        self._query_bytes = 0
        #: Held while the caches change (a shape featurised, a row built, a reset): reranks
        #: in several threads share a feature space. Reads, the C kernel's included, take none.
        self._lock = threading.RLock()

    # The current generation's fields, by their former names (tests and tools read them).
    @property
    def generation(self) -> int:
        """The current generation's number: bumped by every reset."""
        return self._gen.number

    @property
    def names(self) -> list[str]:
        return self._gen.names

    @property
    def cached_bytes(self) -> int:
        """The bytes the current generation's shapes hold."""
        return self._gen.shape_bytes

    @property
    def _shapes(self) -> dict[int, Entry]:
        return self._gen.shapes

    @property
    def _rows(self) -> dict[object, int]:
        return self._gen.rows

    @property
    def _slot_words(self) -> list[frozenset[str]]:
        return self._gen.slot_words

    @property
    def _slot_blooms(self) -> bytearray:
        return self._gen.slot_blooms

    @property
    def _row_table(self) -> RowTable | None:
        return self._gen.row_table

    @property
    def _table(self) -> ShapeTable | None:
        return self._gen.table

    @_table.setter
    def _table(self, value: None) -> None:
        """``None``: the Python passes only, from now on."""
        assert value is None
        with self._lock:
            self._tables = False
            self._gen = Generation(self._gen.number + 1, tables=False)

    def held_bytes(self) -> int:
        """The bytes the caches hold, as counted against ``max_bytes``."""
        return self._gen.held_bytes + self._expanded_bytes + self._query_bytes

    def clear(self) -> None:
        """Drop every cached shape, row and query reading (``forget_namespace`` calls this:
        the caches may hold names read from that namespace's candidates and queries). Reranks
        under way keep their own generation."""
        with self._lock:
            self._reset_rows()
            self._expanded = {}
            self._expanded_bytes = 0
            self._queries = {}
            self._query_bytes = 0

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
            cost = 400 + strings_bytes(info.names) + strings_bytes(info.words)
            if len(self._queries) >= QUERY_CACHE_ENTRIES \
                    or self._query_bytes + cost > self._side_bytes:
                self._queries, self._query_bytes = {}, 0
            if cost <= self._side_bytes:
                self._queries[key] = (info.qtype, info.names, info.words, info.has_content,
                                      info.person, info.intent, info.blooms)
                self._query_bytes += cost
            return info
        return QueryInfo(query, *hit)

    def _new_shape(self, gen: Generation, key: int, prefix: str, kind: str | None,
                   source: str | None, tags: frozenset[str], extra: ExtraSlots) -> Entry:
        """Featurise a prefix not seen yet and cache it (oldest entries out past the bound)."""
        shape = shape_of(prefix, kind, source, tags, *extra)
        source_words = frozenset(t.casefold() for t in tokens(source)) if source else frozenset()
        # Bytes held: the entry and its shape, their strings and word sets.
        cost = 400 + strings_bytes(shape.slots) + strings_bytes(shape.words) \
            + strings_bytes(source_words)
        table = gen.table
        if table is not None:
            cost += ShapeTable.BYTES_PER_SHAPE
        # Shapes with the same slots (most of them) share one id, so their feature rows are
        # built once and stay few however many texts pass through.
        # Keyed by the source's words too: sources ``None`` and ``"none"`` share the slot
        # ``source:none`` but not whether a question names them. The shapes of a slot key
        # share one object of its source words (one place for a rerank to read, not many).
        slot = gen.slot(shape.slots, source_words)
        entry = (*slot, shape.words, cost, shape)
        if cost + gen.vocab_bytes <= self._gen_bytes:
            gen.shapes[key] = entry
            gen.shape_bytes += cost
            if table is not None:
                table.insert(key, slot[0], shape.words)
        self._trim(gen)
        return entry

    def _trim(self, gen: Generation) -> None:
        """Evict shapes, first in first out (no per-hit cost), until the generation is within
        its bound (the caller holds the lock)."""
        table = gen.table
        while gen.shapes and gen.held_bytes > self._gen_bytes:
            oldest = next(iter(gen.shapes))
            gen.shape_bytes -= gen.shapes.pop(oldest)[3]
            if table is not None:
                table.discard(oldest)

    def rows(self, query: QueryInfo, batch: CandidateBatch, *,
             structure: list[int] | None, tag_slots: tuple[str, ...],
             doc_features: bool, speaker_roles: bool = False,
             answer_slots: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
        """``(distinct, of)`` of :meth:`feature_rows`, in the current generation (its names:
        :meth:`names_of`, :meth:`matrix`; a single-threaded caller's way)."""
        got = self.feature_rows(query, batch, structure=structure, tag_slots=tag_slots,
                                doc_features=doc_features, speaker_roles=speaker_roles,
                                answer_slots=answer_slots)
        return got.distinct, got.of

    def feature_rows(self, query: QueryInfo, batch: CandidateBatch, *,
                     structure: list[int] | None, tag_slots: tuple[str, ...],
                     doc_features: bool, speaker_roles: bool = False,
                     answer_slots: tuple[str, ...] = ()) -> FeatureRows:
        """The distinct feature rows of the batch's candidates for this query, for each
        candidate the position of its row among them, and the generation they index.
        ``structure`` holds each candidate's structure code (its neighbour and first-stage
        slots, :data:`~heaprank.model.features.STRUCTURE_SLOTS`); ``None`` means none of
        either. ``speaker_roles`` adds the ``person:`` slot; ``tag_slots`` and
        ``answer_slots`` add shape slots (:func:`~heaprank.model.features.shape_of`)."""
        if self._over_bounds(self._gen):
            with self._lock:
                if self._over_bounds(self._gen):
                    self._reset_rows()
        # 0: no person slot; else 1 + the question's person. The role comes with the source,
        # which the shape (and so its slot id) already fixes.
        person = 1 + PERSONS.index(query.person) if person_slotted(query, speaker_roles) else 0
        gen = self._gen  # one generation for the whole call, whatever resets meanwhile
        extra = (tag_slots, answer_slots)
        if shape_rows_kernel is not None and gen.table is not None and not doc_features \
                and not (tag_slots or answer_slots):
            # reads only (one C call: atomic under the GIL), so no lock: the usual case
            done = self._rows_kernel(query, batch, structure, person, gen)
            if done is not None:
                return FeatureRows(*done, gen)
        with self._lock:  # featurises and caches: one thread at a time
            gen = self._gen
            distinct, of = self._rows_python(gen, query, batch, extra, doc_features,
                                             structure, person)
            self._trim(gen)  # the rows built may have taken the room of shapes
            return FeatureRows(distinct, of, gen)

    def _over_bounds(self, gen: Generation) -> bool:
        return len(gen.names) > self.max_features or len(gen.rows) > self.max_rows \
            or len(gen.slot_ids) > self.max_rows or 2 * gen.vocab_bytes > self._gen_bytes

    def _rows_python(self, gen: Generation, query: QueryInfo, batch: CandidateBatch,
                     extra: ExtraSlots, doc_features: bool,
                     structure: list[int] | None, person: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`feature_rows` in Python (the caller holds the lock)."""
        sources = batch.sources
        entries = self._entries(gen, batch.texts, batch.kinds, sources, batch.tags, extra)
        if doc_features:
            return self._rows_one_by_one(gen, query, batch.ids, sources, entries, structure,
                                         person)
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
        distinct = list(map(gen.rows.get, full))
        if None in distinct:  # rows not built yet
            for j, (key, entry) in enumerate(some.items()):
                if distinct[j] is None:
                    i = keys.index(key)
                    distinct[j] = self._new_row(
                        gen, full[j], query, entry, None,
                        STRUCTURE_SLOTS[NO_STRUCTURE if structure is None else structure[i]],
                        sources[i], bool(person))
        # One array for both (one numpy call less: each costs ~1 us with cold caches).
        both = np.fromiter(itertools.chain(distinct, map(local.__getitem__, keys)),
                           dtype=np.intp, count=len(distinct) + len(keys))
        return both[:len(distinct)], both[len(distinct):]

    def _rows_kernel(self, query: QueryInfo, batch: CandidateBatch,
                     structure: list[int] | None, person: int,
                     gen: Generation | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`feature_rows` by the C kernel (``_features.shape_rows``) in generation
        ``gen`` (the current one if None) when every candidate's shape is cached (no tag
        slots or document features), or None: the Python path then runs, and featurises the
        new shapes. The same row keys as that path, in one C pass."""
        gen = self._gen if gen is None else gen
        table, row_table = gen.table, gen.row_table
        assert shape_rows_kernel is not None and table is not None and row_table is not None
        base = (_QTYPE_CODE[query.qtype] * N_STRUCTURE_CODES) * 16 + 4 * person
        if not query.names:
            base += 1
        if structure is None:
            base += 16 * NO_STRUCTURE
        blooms = query.blooms
        if blooms is None:
            blooms = (word_bloom(query.names), word_bloom(query.words))
        tables = (table.buffer, table.words, gen.slot_words, gen.slot_blooms, row_table.buffer)
        sources = batch.sources
        done = shape_rows_kernel(tables, self.shape_keys(batch.texts, batch.kinds, sources),
                                 (query.names, blooms[0], query.words, blooms[1]), structure,
                                 base)
        if done is None:
            return None
        d, both, missing = done
        rows = np.frombuffer(both, dtype=np.intp)
        if missing:  # rows not built yet: their shapes are cached
            rows = rows.copy()
            with self._lock:
                if gen is not self._gen:
                    return None  # reset since: the Python pass builds them in the new one
                for j, full, i, shape_key in missing:
                    built = gen.rows.get(full)  # by another thread since, maybe
                    if built is None:
                        entry = gen.shapes.get(shape_key)
                        if entry is None:
                            return None  # evicted since: the Python pass featurises it again
                        built = self._new_row(
                            gen, full, query, entry, None,
                            STRUCTURE_SLOTS[NO_STRUCTURE if structure is None
                                            else structure[i]], sources[i], bool(person))
                    rows[j] = built
                self._trim(gen)
        return rows[:d], rows[d:]

    def shape_keys(self, texts: Sequence[str], kinds: Sequence[str | None],
                   sources: Sequence[str | None]) -> tuple[int, ...]:
        """Each candidate's shape key without tag slots, ``hash((prefix, kind, source))``: the
        key :meth:`_entries` caches its shape under (C-level maps, one pass each)."""
        prefixes = map(operator.itemgetter(slice(self.prefix_chars)), texts)
        return tuple(map(hash, zip(prefixes, kinds, sources)))

    def _entries(self, gen: Generation, texts: Sequence[str], kinds: Sequence[str | None],
                 sources: Sequence[str | None], tags: Sequence[frozenset[str]],
                 extra: ExtraSlots) -> list[Entry]:
        """Each candidate's cached shape entry, featurising the prefixes not seen yet
        (``extra``: the tag slots and answer-type families the shapes carry)."""
        prefixes = list(map(operator.itemgetter(slice(self.prefix_chars)), texts))
        # One int per shape (a hash of the prefix and the shape fields): one comparison per
        # cache hit, and no text kept. Tags shape nothing without tag slots: three fields
        # hashed then, five otherwise (the slots asked for are part of the shape).
        if extra[0] or extra[1]:
            skeys = list(map(hash, zip(prefixes, kinds, sources, tags,
                                       itertools.repeat(extra))))
        else:
            skeys = list(map(hash, zip(prefixes, kinds, sources)))
        entries = list(map(gen.shapes.get, skeys))
        if None in entries:
            get = gen.shapes.get
            for i, entry in enumerate(entries):
                if entry is None:
                    entries[i] = get(skeys[i]) or self._new_shape(
                        gen, skeys[i], prefixes[i], kinds[i], sources[i], tags[i], extra)
        return entries  # type: ignore[return-value]  # no None left

    def _rows_one_by_one(self, gen: Generation, query: QueryInfo, ids: Sequence[str],
                         sources: Sequence[str | None], entries: list[Entry],
                         structure: list[int] | None,
                         person: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`feature_rows` with document features: a tuple key per candidate."""
        qnames, qwords = query.names, query.words
        rows_get = gen.rows.get
        distinct: dict[int, int] = {}
        out = []
        for i, entry in enumerate(entries):
            qsrc = not qwords.isdisjoint(entry[1])
            qent = not qnames.isdisjoint(entry[2])
            nbr = STRUCTURE_SLOTS[NO_STRUCTURE if structure is None else structure[i]]
            key = (entry[0], query.qtype, qsrc, qent, nbr, person, ids[i])
            row = rows_get(key)
            if row is None:
                row = self._new_row(gen, key, query, entry, ids[i], nbr, sources[i],
                                    bool(person))
            local = distinct.get(row)
            if local is None:
                local = distinct[row] = len(distinct)
            out.append(local)
        return np.fromiter(distinct, dtype=np.intp, count=len(distinct)), \
            np.array(out, dtype=np.intp)

    @staticmethod
    def _new_row(gen: Generation, key: object, query: QueryInfo, entry: Entry,
                 doc_id: str | None, nbr: tuple[str, ...], source: str | None,
                 person: bool) -> int:
        """Add the row of a candidate's shape ``entry`` for this query; ``person`` adds the
        slot of the question's person x the role of ``source``."""
        qsrc = not query.words.isdisjoint(entry[1])
        qent = not query.names.isdisjoint(entry[2])
        slots = entry[4].slots + (f"qsrc:{yes(qsrc)}", f"qent:{yes(qent)}") + nbr
        if person:
            slots = slots + (person_slot(query.person, source),)
        return gen.add_row(key, slots, expand_features(query.qtype, slots, doc_id))

    def _reset_rows(self) -> None:
        """Start a new generation (the caller holds the lock): row and feature ids are reused
        in it, so what was keyed by the old ones is stale, but its readers keep it whole."""
        self._gen = Generation(self._gen.number + 1, tables=self._tables)

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`Generation.matrix_of` in the current generation."""
        return self._gen.matrix_of(rows)

    def expand(self, qtype: str, slots: tuple[str, ...], doc_id: str | None) -> tuple[str, ...]:
        """:func:`expand_features`, cached (feedback rebuilds the same rows over and over)."""
        key = (qtype, slots, doc_id)
        out = self._expanded.get(key)
        if out is None:
            out = expand_features(qtype, slots, doc_id)
            cost = 200 + 2 * _size(out) + sum(map(_size, out))
            if len(self._expanded) > self.max_rows \
                    or self._expanded_bytes + cost > self._side_bytes:
                self._expanded, self._expanded_bytes = {}, 0
            if cost <= self._side_bytes:
                self._expanded[key] = out
                self._expanded_bytes += cost
        return out

    def names_of(self, row: int) -> tuple[str, ...]:
        """The feature strings of a row of the current generation."""
        return self._gen.names_of(row)

    def slots_of(self, row: int) -> tuple[str, ...]:
        """The slots a row of the current generation was built from."""
        return self._gen.slots_of(row)
