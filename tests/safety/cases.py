"""Inputs that once made a C kernel read freed memory, each run as a script in a process of its
own under ``PYTHONMALLOC=debug`` (which fills freed memory with a pattern, so such a read
crashes instead of passing unseen): ``python tests/safety/cases.py CASE`` prints ``ok`` and
exits 0, or crashes. It imports heaprank only (no test package), so it runs against any tree
on ``PYTHONPATH``, the ones before the kernels were made safe included.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

from heaprank import Candidate, Reranker
from heaprank.errors import HeapRankError
from heaprank.scoring import candidates
from heaprank.scoring.candidates import coerce_candidates

NOW = 1_750_000_000.0
ROUNDS = 30


def _coerce(items: list[Any]) -> None:
    try:
        coerce_candidates(items, now=NOW)
    except HeapRankError:  # what the Python path makes of the mutated input: its own error
        pass


class _Armed:
    """Whether the keys below act (off while their dicts are made, which compares them too)."""

    on = False


def _clearing_key(slot_of: str, items: list[Any]) -> object:
    """A key in the slot of ``slot_of`` (a lookup of it compares with the key) whose ``__eq__``
    clears ``items`` once armed."""

    class Key:
        def __hash__(self) -> int:
            return hash(slot_of)

        def __eq__(self, other: object) -> bool:
            if _Armed.on:
                items.clear()
            return False

    return Key()


def dict_key_eq_clears_the_list() -> None:
    """A candidate dict's key whose ``__eq__`` (run by a lookup in that dict) clears the
    caller's list of candidates: the dicts after it, and the dict being read, are freed."""
    items: list[Any] = []
    for _ in range(ROUNDS):
        _Armed.on = False
        items[:] = [{"id": "a", "text": "t"}, {_clearing_key("text", items): 1, "id": "b",
                                               "text": "u"},
                    *[{"id": f"c{i}", "text": "v", "metadata": {"kind": "fact"}}
                      for i in range(40)]]
        _Armed.on = True
        _coerce(items)


def metadata_key_eq_clears_the_list() -> None:
    """The same key in a candidate's metadata (where a kernel must not compare it at all)."""
    items: list[Any] = []
    for _ in range(ROUNDS):
        _Armed.on = False
        items[:] = [Candidate(f"c{i}", "v", None, {"kind": "fact", "source": "x",
                                                   _clearing_key("kind", items): 1})
                    for i in range(40)]
        _Armed.on = True
        _coerce(items)


class _Finaliser:
    """A cycle (only a GC pass frees it) whose finaliser calls ``mutate``, then leaves another
    such cycle for the next pass, ``again`` times."""

    def __init__(self, mutate: Callable[[], None], again: int = 0) -> None:
        self.mutate, self.again = mutate, again
        self.me = self

    def __del__(self) -> None:
        self.mutate()
        if self.again:
            _Finaliser(self.mutate, self.again - 1)


def _in_a_gc_pass(items: list[Any], mutate: Callable[[], None], again: int = 0) -> Any:
    """Call the candidates kernel with a cycle left for the GC, whose finaliser calls
    ``mutate``: with the collector off while the cycle and the call's arguments are made, and
    a threshold of 1, the pass runs at the kernel's first container allocation, not before
    (and ``again`` more passes at the next ones). Then the public path, whatever the kernel
    gave."""
    kernel = getattr(candidates, "_KERNEL", None) or getattr(candidates, "speedups", None)
    if kernel is None:
        raise SystemExit("no candidates kernel built: nothing to hold to it")
    args = (items, candidates._C_SLOTS, candidates._C_REVERSE, candidates._C_KINDS,
            candidates._C_BOUNDS, NOW, NOW + 300.0)
    gc.disable()
    _Finaliser(mutate, again)
    gc.set_threshold(1)
    gc.enable()
    try:
        made = kernel.coerce_columns(*args)
    finally:
        gc.set_threshold(700, 10, 10)
    _coerce(items)
    return made


def _metadata(i: int) -> dict[str, Any]:
    """Labels that make the kernel allocate containers as it reads them (a column per label
    field), and values after them (in field order) held by this dict alone."""
    return {"kind": "fact", "source": "x", "created_at": NOW - i, "thread": f"s{i}",
            "position": float(i) + 0.5}


def _tagged(n: int) -> list[Candidate]:
    return [Candidate(f"c{i}", "some text", float(i), _metadata(i)) for i in range(n)]


def finaliser_clears_the_list() -> None:
    """A finaliser run by a GC pass inside the kernel clears the caller's list (freeing the
    candidates it held), at the kernel's first container allocation or a later one: the kernel
    defers (the list changed as it was copied) or reads the candidates it was given, all of
    them."""
    served = 0
    for passes in range(1, ROUNDS + 1):
        items: list[Any] = _tagged(60)
        calls = iter(range(passes, 0, -1))

        def clear_at_the_last(calls: Any = calls, items: list[Any] = items) -> None:
            if next(calls, 0) == 1:
                items.clear()

        made = _in_a_gc_pass(items, clear_at_the_last, again=passes)
        assert made is None or made[1] == tuple(f"c{i}" for i in range(60)), made
        served += made is not None
    assert served, "the list was never cleared past the kernel's copy of it"


def finaliser_swaps_the_metadata() -> None:
    """Finalisers run by the GC passes inside the kernel give every candidate another metadata
    (a frozen dataclass's slot can still be set) and empty the old one: the values the kernel
    was reading lose their last reference."""
    def swap(items: list[Candidate]) -> None:
        for i, c in enumerate(items):
            old = c.metadata
            object.__setattr__(c, "metadata", _metadata(i))
            old.clear()  # type: ignore[attr-defined]

    for _ in range(ROUNDS):
        items = _tagged(60)
        made = _in_a_gc_pass(items, lambda items=items: swap(items), again=200)  # type: ignore[misc]
        # every swap gives the same values: the kernel's batch is the one they make
        want = candidates.coerce_checked(items, now=NOW)
        assert made is not None and made[1] == want.ids and made[4] > 0, made
        assert made[5][candidates._FIELDS.index("thread")] == want.threads


def shape_table_holds_a_bad_word_set() -> None:
    """Python writes into the shape table's buffer (a bytearray: anyone can) where the kernel
    finds a shape's word set: the kernel must read no object from it."""
    rr = Reranker()
    cands = [{"id": f"m{i}", "text": f"Maya flew to Lisbon on day {i}",
              "metadata": {"source": "maya"}} for i in range(8)]
    rr.rerank("When did Maya fly to Lisbon?", cands, namespace="ns", now=NOW)
    table = rr._space._table
    if table is None:
        return  # no kernel: nothing reads the table
    held = table.entries[:, 1] != 0
    table.entries[held, 2] = -1  # every bloom bit: the word set is read
    table.entries[held, 3] = 0x7FFF_0000_1234  # no object's address, nor a word set's index
    rr.rerank("When did Maya fly to Lisbon?", cands, namespace="ns", now=NOW)


CASES = {f.__name__: f for f in (dict_key_eq_clears_the_list, metadata_key_eq_clears_the_list,
                                  finaliser_clears_the_list, finaliser_swaps_the_metadata,
                                  shape_table_holds_a_bad_word_set)}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
    print("ok")
