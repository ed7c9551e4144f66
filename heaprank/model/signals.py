"""The signals of the score, each declared once: ``score = prod_i signal_i ** w_i x rules``.

A :class:`Signal` names everything the rest of heaprank reads about one factor: its name (the
:class:`~heaprank.config.Weights` field, the key in ``Ranked.signals``), where its value comes
from in a rerank, its default exponent, its EXPLAIN label, its code in a stored impression and
whether the impression keeps its values for the re-fit. :data:`SIGNALS` is the one list; the
weights, the scorer's columns, EXPLAIN, the impression codec and the re-fit all read it.

Adding a signal (docs/design.md, "Adding a signal"): append a :class:`Signal` here with a new
``code``, its test, and its line in docs/scoring.md. Its ``column`` reads the rerank's inputs
(:class:`Inputs`): the candidates' batch, the relevance and the other signals already computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable

#: A signal's values in a rerank: an ``(n,)`` array in (0, inf), or one float for every
#: candidate, read from the rerank's :class:`Inputs`.
Column = Callable[[Any], Any]


class Inputs:
    """What a :data:`Column` reads (documentation of the scorer's ``SignalInputs``):

    - ``batch``: the candidates (:class:`~heaprank.scoring.candidates.CandidateBatch`);
    - ``seen``: the rerank's reading of them (``seen.relevance``, ``seen.info`` of the query);
    - ``signals``: the values computed before the columns (``importance``, ``ranked_use``,
      ``usage.recency``, ``usage.reinforcement``, ``age`` in seconds);
    - ``request``: the call (``request.config``, ``request.when``, ``request.namespace``).
    """


def _neutral(_inputs: Any) -> float:
    """1 for every candidate: a factor set later (association: by spreading the base score)."""
    return 1.0


@dataclass(frozen=True, slots=True)
class Signal:
    """One factor of the score.

    Attributes:
        name: Its :class:`~heaprank.config.Weights` field and key in ``Ranked.signals``.
        column: Its values in a rerank, from the rerank's :class:`Inputs`.
        weight: Its default exponent (0: off unless a user or the re-fit turns it on).
        code: Its column code in a stored impression (append only: never reuse a code).
        label: Its name in EXPLAIN (the name itself if None).
        logged: Whether an impression stores its values when its weight is above 0, for the
            re-fit to read (signals it does not store are recomputed, or not re-fitted).
        doc: One line on what it measures (the ``Weights`` docstring lists them).
    """

    name: str
    column: Column
    weight: float
    code: int
    label: str | None = None
    logged: bool = False
    doc: str = ""

    @property
    def explain_label(self) -> str:
        return self.label or self.name


#: Every signal, in the order of the score's columns.
SIGNALS: tuple[Signal, ...] = (
    Signal("relevance", attrgetter("seen.relevance"), 1.0, code=0, label="rel",
           doc="the retriever's score, min-max normalised above relevance_floor"),
    Signal("recency", attrgetter("signals.usage.recency"), 1.0, code=1,
           doc="2 ** (-age / half_life_s) since last use, or the Ebbinghaus retention"),
    Signal("importance", attrgetter("signals.importance"), 1.0, code=2,
           doc="the candidate's importance, or its kind's dose"),
    Signal("usefulness", attrgetter("signals.ranked_use"), 1.5, code=3, label="useful",
           doc="P(useful) of its shape's links for this question type, learned from feedback"),
    Signal("reinforcement", attrgetter("signals.usage.reinforcement"), 0.0, code=6,
           logged=True, doc="HEBBS: 1 + log2(1 + uses) / log2(1 + retention.reinforcement_cap), in [1, 2]"),
    Signal("association", _neutral, 0.0, code=8, label="assoc", logged=True,
           doc="co-use spreading from documents ranked high (needs Learning(co_use=CoUse()))"),
)
#: The signals' names, in :data:`SIGNALS` order.
NAMES: tuple[str, ...] = tuple(s.name for s in SIGNALS)
#: Each signal by name.
BY_NAME: dict[str, Signal] = {s.name: s for s in SIGNALS}
#: The signals an impression stores (when their weight is above 0).
LOGGED: tuple[str, ...] = tuple(s.name for s in SIGNALS if s.logged)
