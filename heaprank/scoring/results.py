"""Results: an immutable :class:`Ranking` of :class:`Ranked` items, each with ``explain()``."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, overload

import numpy as np

from ..model.signals import SIGNALS
from .candidates import Candidate
from .standings import Standings


def exp_score(log_score: float) -> float:
    """``exp`` of a log score: ``inf`` past the float range (a huge explicit importance with a
    weight above 1, say) instead of ``OverflowError``; the order is kept on the log scale."""
    try:
        return math.exp(log_score)
    except OverflowError:
        return math.inf


#: Each signal's name in EXPLAIN, from its declaration.
_LABEL = {s.name: s.explain_label for s in SIGNALS}


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked candidate: its final score, every signal's value and why it ranks here.

    Attributes:
        rank: 1 for the best.
        score: ``prod signal ** weight x rules``.
        candidate: The converted candidate (the caller's object is never touched).
        signals: Signal name -> value before its weight is applied.
        weights: Signal name -> weight (exponent) used.
        details: Signal name -> what the value came from ("score 7.31", "age 20.0d", "fact").
        top_links: The strongest usefulness features of this candidate, ``(feature, p)``.
        rules: Rules that fired, ``(name, multiplier)``.
        flags: What was neutralised or clamped (lenient input handling, empty query, ...).
    """

    rank: int
    score: float
    candidate: Candidate
    signals: Mapping[str, float]
    weights: Mapping[str, float]
    details: Mapping[str, str] = field(default_factory=dict)
    top_links: tuple[tuple[str, float], ...] = ()
    rules: tuple[tuple[str, float], ...] = ()
    flags: tuple[str, ...] = ()

    #: The EXPLAIN line once composed, or how the reranker composes it (an
    #: :class:`ExplainTemplate` and this item's values); never set by ``__init__`` or
    #: ``dataclasses.replace``, so a copy with other fields composes its own line.
    _line: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.candidate.id

    def explain(self) -> str:
        """The one-line EXPLAIN: each weighted signal, its source, the top links, rules, flags."""
        line = self._line
        if line.__class__ is str:
            return line
        line = _compose(self) if line is None else line.line(self)
        _put_line(self, line)  # a cache of a function of frozen fields
        return line

    def __getstate__(self) -> list[Any]:
        """The fields' values for copy and pickle (each one as reading it gives it), and the
        EXPLAIN line once composed: what composes it on demand belongs to the whole rerank."""
        line = self._line
        return [self.rank, self.score, self.candidate, self.signals, self.weights, self.details,
                self.top_links, self.rules, self.flags, line if line.__class__ is str else None]

    def __setstate__(self, state: list[Any]) -> None:
        *values, line = state
        for put, value in zip(_SETTERS, values):
            put(self, value)
        _SETTERS[-1](self, line if line.__class__ is str else None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view of this result, EXPLAIN included."""
        return {
            "rank": self.rank, "id": self.id, "score": self.score, "text": self.candidate.text,
            "signals": dict(self.signals), "weights": dict(self.weights),
            "details": dict(self.details),
            "top_links": [{"feature": f, "p": p} for f, p in self.top_links],
            "rules": [{"name": n, "multiplier": m} for n, m in self.rules],
            "flags": list(self.flags), "explain": self.explain(),
        }


_FIELDS = ("rank", "score", "candidate", "signals", "weights", "details", "top_links", "rules",
           "flags", "_line")
_SETTERS = tuple(Ranked.__dict__[name].__set__ for name in _FIELDS)
_put_line = _SETTERS[-1]
#: The three details every result has (its EXPLAIN line shows them in brackets), in this order.
DETAIL_NAMES = ("relevance", "recency", "importance")
#: Most results' relevance and recency details, as ``%`` formats of the retriever score and of
#: the age in days. A :class:`ResultSource` row may hold those two numbers in place of the two
#: texts (a float where a text would be): its EXPLAIN line then formats them in its own ``%``,
#: not in two strings of their own first.
SCORE_DETAIL = "score %.3g"
AGE_DETAIL = "age %.1fd"


class ResultSource:
    """What the results of one rerank are built from, for the parts of them worked out on first
    use: result ``j`` (rank ``j + 1``) takes its ``signals`` and ``details`` (while the slot of
    each holds this source) and its EXPLAIN line from here.

    ``rows[j]`` is result ``j``'s signal values in ``names`` order, followed by its three
    details (:data:`DETAIL_NAMES`; the first two may be the numbers of :data:`SCORE_DETAIL` and
    :data:`AGE_DETAIL`) and one place for its top links' text: the line is one ``%`` format of
    that list. ``link_rows[j]`` keys its top links' text in ``link_texts``, a cache
    the reranker shares between the results whose top links are the same.
    """

    __slots__ = ("names", "template", "rows", "link_rows", "link_texts")

    def __init__(self, names: tuple[str, ...], template: ExplainTemplate, rows: list[list[Any]],
                 link_rows: list[int], link_texts: dict[int, str]) -> None:
        self.names = names
        self.template = template
        self.rows = rows
        self.link_rows = link_rows
        self.link_texts = link_texts

    def signals(self, j: int) -> dict[str, float]:
        return dict(zip(self.names, self.rows[j]))  # zip stops at the last signal

    def details(self, j: int) -> dict[str, str]:
        row, n = self.rows[j], len(self.names)
        rel, rec, origin = row[n:n + 3]
        if rel.__class__ is float:  # the numbers of the two usual details
            rel, rec = SCORE_DETAIL % rel, AGE_DETAIL % rec
        return dict(zip(DETAIL_NAMES, (rel, rec, origin)))

    def line(self, item: Ranked) -> str:
        """``item``'s EXPLAIN line, what :func:`_compose` gives for it."""
        j = item.rank - 1
        row, template = self.rows[j], self.template
        if _read_details(item) is not self:  # read (or given) already: composed from them
            return template.compose(item, row, self.link_texts, self.link_rows[j])
        links = item.top_links
        if links:
            key = self.link_rows[j]
            text = self.link_texts.get(key)
            if text is None:
                text = self.link_texts[key] = _links(links)
        else:
            text = ""
        row[-1] = text
        direct = template.numbers if row[len(self.names)].__class__ is float else template.direct
        line = direct % template.pick(row)
        return line + _tail(item) if item.rules or item.flags else line


def new_ranked(fields: tuple[Any, ...]) -> Ranked:
    """A :class:`Ranked` as the reranker makes them, from its fields in order (``rank`` to
    ``flags``) and then what composes its EXPLAIN line on first use (a :class:`ResultSource`);
    its signals and details too are made on first read when they are given as that source.
    Sets the slots directly: a frozen dataclass's ``__init__`` costs twice as much, and a rerank
    builds one per result."""
    item = object.__new__(Ranked)
    for put, value in zip(_SETTERS, fields):
        put(item, value)
    return item


def new_ranked_all(rows: tuple[tuple[Any, ...], ...]) -> tuple[Ranked, ...]:
    """``tuple(map(new_ranked, rows))``."""
    return tuple(map(new_ranked, rows))


#: Materialises a result's signals or details once, whichever thread reads them first.
_ON_DEMAND = threading.Lock()


def _on_demand(name: str, make: Callable[[ResultSource, int], dict[str, Any]]) -> property:
    """Field ``name`` of :class:`Ranked` read through its slot, its value made (once) by
    ``make`` while the slot holds the rerank's :class:`ResultSource`: to every reader it is
    the plain field it would be if made up front."""
    slot = Ranked.__dict__[name]
    get, put = slot.__get__, slot.__set__

    def read(item: Ranked) -> Any:
        value = get(item)
        if value.__class__ is ResultSource:
            with _ON_DEMAND:  # one dict for every reader, as a field made up front
                value = get(item)
                if value.__class__ is ResultSource:
                    value = make(value, item.rank - 1)
                    put(item, value)
        return value

    return property(read, put)


_read_details = Ranked.__dict__["details"].__get__  # the slot as it is, never materialised
for _name, _make in (("signals", ResultSource.signals), ("details", ResultSource.details)):
    setattr(Ranked, _name, _on_demand(_name, _make))


def _compose(item: Ranked) -> str:
    """EXPLAIN of any :class:`Ranked`, field by field (the specification of the line)."""
    parts: list[str] = []
    for name, value in item.signals.items():
        weight = item.weights.get(name, 1.0)
        if weight == 0:
            continue
        text = f"{_LABEL.get(name, name)} {value:.2f}"
        if weight != 1:
            text += f"^{weight:.3g}"
        detail = item.details.get(name)
        if detail:
            text += f" ({detail})"
        if name == "usefulness" and item.top_links:
            text += _links(item.top_links)
        parts.append(text)
    return " x ".join(parts) + _tail(item)


def _links(top_links: tuple[tuple[str, float], ...]) -> str:
    return " [" + ", ".join([f"{f}={p:.2f}" for f, p in top_links]) + "]"


def _tail(item: Ranked) -> str:
    line = ""
    if item.rules:
        line += " x rules " + ", ".join([f"{n} x{m:.3g}" for n, m in item.rules])
    if item.flags:
        line += " ! " + "; ".join(item.flags)
    return line


def _no_values(row: list[Any]) -> tuple[()]:
    return ()


class ExplainTemplate:
    """The EXPLAIN line of one rerank's results as one ``%`` format: the weights, labels and
    which signals show are the same for every result of a call, so they are worked out once.

    :meth:`compose` gives what :func:`_compose` gives for an item whose signals are ``names``
    in order, weighted by ``weights`` (a property test holds the two to the same text); an
    item without the details it expects (every shown signal but usefulness has one, and
    usefulness none) is composed field by field.

    ``direct % pick(row)`` is the line (but its rules and flags) of a result whose details are
    the three of :data:`DETAIL_NAMES` and nothing else, from its :class:`ResultSource` row
    (its signal values, those details, its top links' text); ``numbers % pick(row)`` the same
    from a row that holds the numbers of :data:`SCORE_DETAIL` and :data:`AGE_DETAIL`.
    """

    __slots__ = ("format", "shown", "direct", "numbers", "pick")

    def __init__(self, names: tuple[str, ...], weights: tuple[float, ...]) -> None:
        parts, shown, direct, numbers, picks = [], [], [], [], []
        number_detail = {"relevance": SCORE_DETAIL, "recency": AGE_DETAIL, "importance": "%s"}
        n = len(names)
        for i, (name, weight) in enumerate(zip(names, weights)):
            if weight == 0:
                continue
            text = _LABEL.get(name, name).replace("%", "%%") + " %.2f"
            if weight != 1:
                text += f"^{weight:.3g}"
            picks.append(i)
            # usefulness: its top links follow; every other signal: its detail in brackets
            if name == "usefulness":
                parts.append(text + "%s")
                direct.append(text + "%s")
                numbers.append(text + "%s")
                picks.append(n + 3)
            else:
                parts.append(text + " (%s)")
                if name in DETAIL_NAMES:
                    direct.append(text + " (%s)")
                    numbers.append(f"{text} ({number_detail[name]})")
                    picks.append(n + DETAIL_NAMES.index(name))
                else:
                    direct.append(text)
                    numbers.append(text)
            shown.append((i, None if name == "usefulness" else name))
        self.format = " x ".join(parts)
        self.shown = tuple(shown)
        self.direct = " x ".join(direct)
        self.numbers = " x ".join(numbers)
        # one pick gives the value itself, not a 1-tuple: % takes it as well (none is a tuple)
        self.pick: Callable[[list[Any]], Any] = itemgetter(*picks) if picks else _no_values

    def compose(self, item: Ranked, values: Sequence[Any], link_texts: dict[int, str] | None = None,
                row: int = -1) -> str:
        """The line of ``item``, whose signal values in ``names`` order are ``values``.
        ``link_texts[row]`` caches the text of its top links: the reranker shares one cache
        between the results whose top links are the same (one key per feature row)."""
        details = item.details
        if "usefulness" in details:  # a note on usefulness (exploration): not in the template
            return _compose(item)
        args: list[object] = []
        for i, name in self.shown:
            args.append(values[i])
            if name is None:
                if not item.top_links:
                    args.append("")
                    continue
                text = None if link_texts is None else link_texts.get(row)
                if text is None:
                    text = _links(item.top_links)
                    if link_texts is not None:
                        link_texts[row] = text
                args.append(text)
            else:
                detail = details.get(name)
                if not detail:
                    return _compose(item)
                args.append(detail)
        return self.format % tuple(args) + _tail(item)


@functools.lru_cache(maxsize=256)
def explain_template(names: tuple[str, ...], weights: tuple[float, ...]) -> ExplainTemplate:
    """The :class:`ExplainTemplate` of these signals and weights, made once per distinct
    weights (a reranker uses a few: its own, per question type, per temporal intent)."""
    return ExplainTemplate(names, weights)


@dataclass(frozen=True, slots=True)
class WhyNot:
    """Why a candidate missed the top k: the factor that cost it most against the k-th result."""

    id: str
    rank: int | None  # None when a rule dropped it
    score: float
    kth_score: float
    factor: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, eq=False)
class Ranking(Sequence[Ranked]):
    """The top ``k`` results, best first, plus what ``why_not`` needs about the rest.

    Attributes:
        recall_id: Pass it to ``Reranker.feedback`` (from any process sharing the state).
        namespace: Whose links were used.
        query: The query as given.
        qtype: The question type read from it.
        items: The top-k :class:`Ranked` results.
        degraded: The state could not be read or written (an outage, no connection free in
            time): ranked on the retriever and the priors, or not recorded, so a feedback on
            ``recall_id`` is unknown. EXPLAIN says why; ``Reranker.stats()`` counts them.
    """

    recall_id: str
    namespace: str
    query: str
    qtype: str
    items: tuple[Ranked, ...]
    standings: Standings = field(default_factory=lambda: Standings((), np.empty(0, np.intp)))
    signal_names: tuple[str, ...] = ()
    dropped: Mapping[str, str] = field(default_factory=dict)
    degraded: bool = False

    def __eq__(self, other: object) -> bool:
        """Equal when every field is: the results, and the arrays element by element."""
        if not isinstance(other, Ranking):
            return NotImplemented
        return (self.recall_id, self.namespace, self.query, self.qtype, self.items,
                self.standings, self.signal_names, dict(self.dropped), self.degraded) == (
                    other.recall_id, other.namespace, other.query, other.qtype, other.items,
                    other.standings, other.signal_names, dict(other.dropped), other.degraded)

    @property
    def order_ids(self) -> tuple[str, ...]:
        """Every candidate no rule dropped, best first."""
        return self.standings.ids

    @property
    def log_scores(self) -> np.ndarray:
        """Their log scores, best first."""
        return self.standings.log_scores

    @property
    def log_terms(self) -> np.ndarray:
        """Their log score's terms, one column per signal, best first."""
        return self.standings.log_terms

    @property
    def log_rules(self) -> np.ndarray:
        """Their rule multipliers' logs, best first."""
        return self.standings.log_rules

    __hash__ = None  # type: ignore[assignment]  # holds arrays: a value, not a key

    @overload
    def __getitem__(self, index: int) -> Ranked: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Ranked]: ...

    def __getitem__(self, index: int | slice) -> Ranked | Sequence[Ranked]:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Ranked]:
        return iter(self.items)

    @property
    def ids(self) -> list[str]:
        """Ids of the top-k results, best first."""
        return [r.id for r in self.items]

    def to_dicts(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.items]

    def explain(self, k: int | None = None) -> str:
        """An aligned table of the top ``k`` results with their EXPLAIN lines."""
        rows = self.items if k is None else self.items[:k]
        width = max((len(r.id) for r in rows), default=2)
        return "\n".join(f"{r.rank:>3}. {r.score:8.4f}  {r.id:<{width}}  {r.explain()}"
                         for r in rows)

    def why_not(self, id: str) -> WhyNot:
        """Why candidate ``id`` is not in the top k: the factor that cost it most against the
        k-th result, or the rule that dropped it.

        Raises:
            KeyError: ``id`` was not among the candidates.
            ValueError: ``id`` is in the top k.
        """
        if id in self.dropped:
            return WhyNot(id, None, 0.0, self.items[-1].score if self.items else 0.0,
                          "rules", f"{id!r} was dropped: {self.dropped[id]}")
        try:
            pos = self.order_ids.index(id)
        except ValueError:
            raise KeyError(f"{id!r} was not among the candidates") from None
        k = len(self.items)
        if pos < k:
            raise ValueError(f"{id!r} is in the top {k} (rank {pos + 1})")
        kth = k - 1
        terms = list(self.signal_names) + ["rules"]
        deficit = np.append(self.log_terms[kth] - self.log_terms[pos],
                            self.log_rules[kth] - self.log_rules[pos])
        worst = int(np.argmax(deficit))
        factor = terms[worst]
        ratio = math.exp(min(deficit[worst], 700.0))
        score, kth_score = exp_score(self.log_scores[pos]), exp_score(self.log_scores[kth])
        message = (f"{id!r} ranks {pos + 1} (score {score:.4g}) behind #{k} {self.order_ids[kth]!r} "
                   f"({kth_score:.4g}); it lost most on {factor} (x{1 / ratio:.3g} against #{k})")
        return WhyNot(id, pos + 1, score, kth_score, factor, message)
