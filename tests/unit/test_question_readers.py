"""How a question is read (its person, the speaker role of a source, temporal intent) and what
the readings steer: the person and role slots, temporal intent x recency."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, Features, Reranker, Scoring
from heaprank.errors import ConfigError
from heaprank.model.answer_types import ANSWER_FAMILIES
from heaprank.model.features import FIXED_SLOTS, GAP_SLOTS, RANK_SLOTS
from heaprank.model.questions import (
    PERSONS,
    ROLES,
    analyze_query,
    question_person,
    speaker_role,
    temporal_intent,
)
from heaprank.state.codec import Decoded, Head, encode
from tests.job_facts import DAY, NOW, job_facts

# ------------------------------------------------------------------ question person


@pytest.mark.parametrize("question, person", [
    ("What did you recommend for my back pain?", "second"),
    ("Which restaurant did you suggest?", "second"),
    ("What was your advice about the lease?", "second"),
    ("Could you tell me what you said about Lisbon?", "second"),
    ("What is my dentist's name?", "first"),
    ("When did I book the flight?", "first"),
    ("What did we decide about the trip?", "first"),
    ("Can you remind me what my doctor said?", "first"),  # a request: its "you" is the asked
    ("Could you please tell me my flight time?", "first"),
    ("What did Caroline research?", "third"),
    ("When did Melanie paint a sunrise?", "third"),
    ("Who is Zoë?", "third"),
    ("", "third"),
    ("Yourself? Me?", "second"),
    ("What did you’re told?", "second"),  # typographic apostrophe
])
def test_question_person(question: str, person: str) -> None:
    assert question_person(question) == person
    assert analyze_query(question).person == person


@pytest.mark.parametrize("source, role", [
    ("user", "user"), ("User", "user"), ("human", "user"), ("assistant", "assistant"),
    (" AI ", "assistant"), ("bot", "assistant"), ("Caroline", "other"), ("tool", "other"),
    ("system", "other"), (None, "other"), ("", "other"),
])
def test_speaker_role(source: str | None, role: str) -> None:
    assert speaker_role(source) == role


# ------------------------------------------------------------------ temporal intent


@pytest.mark.parametrize("question, intent", [
    ("What is my current job?", "recent"),
    ("Where does Caroline live now?", "recent"),
    ("Does she still play the guitar?", "recent"),
    ("What is the latest on the lease?", "recent"),
    ("What was her last job?", "recent"),
    ("When did he last call?", "recent"),
    ("When was the last time we met?", "recent"),
    ("What car do you drive these days?", "recent"),
    ("Is he currently in Paris?", "recent"),
    ("Where did he live in 2019?", "past"),
    ("What did she do last summer?", "past"),
    ("What did I say two years ago?", "past"),
    ("What did she use to paint? She used to paint birds.", "past"),
    ("Where did they live originally?", "past"),
    ("Which gym did she go to at first?", "past"),
    ("What did Melanie do in May?", "past"),
    ("What did we do last weekend?", "past"),
    # negatives: no intent, or both at once
    ("When did Caroline go to the support group?", "none"),
    ("Do you know the weather?", "none"),  # "know" is not "now"
    ("What is the snowfall in the Alps?", "none"),
    ("Lastly, what was the plan?", "none"),
    ("What currency does Japan use?", "none"),
    ("How many kids does Maya have?", "none"),
    ("What does she do now, and what did she do in 2019?", "none"),
    ("", "none"),
])
def test_temporal_intent(question: str, intent: str) -> None:
    assert temporal_intent(question) == intent
    assert analyze_query(question).intent == intent


# ------------------------------------------------------------------ the person slot


def test_person_slots_are_appended_to_the_codebook() -> None:
    """The codec's codebook is append-only: the new slots sit at its end, every earlier code
    keeps its meaning (the first entries are the ones of schema 2)."""
    person = [f"person:{p}/{r}" for p in PERSONS for r in ROLES]
    stage = list(RANK_SLOTS + GAP_SLOTS)  # issue 24, after the person slots
    answers = [f"{f}:{v}" for f in ANSWER_FAMILIES for v in ("yes", "no")]  # issue 34, last
    assert list(FIXED_SLOTS[-len(answers):]) == answers
    end = len(FIXED_SLOTS) - len(answers)
    assert list(FIXED_SLOTS[end - len(stage):end]) == stage
    assert list(FIXED_SLOTS[end - len(stage) - len(person):end - len(stage)]) == person
    assert FIXED_SLOTS[:2] == ("kind:none", "source:none")
    assert FIXED_SLOTS.index("source:tool") == 45  # the last code of schema 2
    assert FIXED_SLOTS.index("person:first/user") == 46
    slots = (("kind:none", "person:second/assistant"),)
    body = encode(Head("what", NOW, True, False, ()), ("a",), slots, None)
    assert b"person" not in body  # a fixed one-byte code, not a table string
    assert Decoded(body).slots == slots


def _memories(ns: str) -> list[dict[str, object]]:
    """Two memories of the same shape but for their role: the user's and the assistant's."""
    return [
        {"id": f"{ns}-u", "text": "Talked about the knee and the stretches for it",
         "score": 1.0, "metadata": {"source": "user", "created_at": NOW - DAY}},
        {"id": f"{ns}-a", "text": "Suggested easy stretches for the sore knee today",
         "score": 1.0, "metadata": {"source": "assistant", "created_at": NOW - DAY}},
    ]


def _teach(rr: Reranker) -> None:
    """Second-person questions are answered by the assistant's memory, first-person ones by
    the user's, in twenty namespaces."""
    for i in range(20):
        ns = f"user:{i}"
        for question, answer in (("What did you recommend for it?", f"{ns}-a"),
                                 ("What did I say about it?", f"{ns}-u")):
            ranking = rr.rerank(question, _memories(ns), namespace=ns, k=2, now=NOW)
            rr.feedback(ranking.recall_id, used=[answer])


def test_speaker_roles_learn_whose_statements_a_question_asks_about() -> None:
    rr = Reranker(config=Config(features=Features(speaker_roles=True)))
    _teach(rr)
    new = _memories("newcomer")
    second = rr.rerank("What did you recommend?", new, namespace="newcomer", now=NOW,
                       track=False)
    first = rr.rerank("What did I say?", new, namespace="newcomer", now=NOW, track=False)
    assert second.ids[0] == "newcomer-a"
    assert first.ids[0] == "newcomer-u"
    assert any(f.startswith("person:second/assistant") or "&person:second/assistant" in f
               for f, _ in second[0].top_links)
    # Without the slot the two questions cannot be told apart: one order for both.
    plain = Reranker(config=Config(features=Features(speaker_roles=False)))
    _teach(plain)
    a = plain.rerank("What did you recommend?", new, namespace="newcomer", now=NOW, track=False)
    b = plain.rerank("What did I say?", new, namespace="newcomer", now=NOW, track=False)
    assert a.ids == b.ids


def test_speaker_roles_is_a_learning_field() -> None:
    rr = Reranker()
    with pytest.raises(ConfigError, match="speaker_roles"):
        rr.rerank("q?", _memories("x"), namespace="x", config=Config(features=Features(speaker_roles=False)))
    with pytest.raises(ConfigError, match="speaker_roles"):
        Config(features=Features(speaker_roles=1))  # type: ignore[arg-type]


# ------------------------------------------------------------ temporal intent x recency


def test_temporal_intent_scales_recency() -> None:
    cfg = Config(scoring=Scoring(intent_recency={"recent": 8.0, "past": -4.0}))
    rr = Reranker(config=cfg)
    cands = job_facts()
    current = rr.rerank("What is my current job?", cands, namespace="u", now=NOW, k=3)
    past = rr.rerank("What was my job back in 2019?", cands, namespace="u", now=NOW, k=3)
    plain = rr.rerank("What is my job?", cands, namespace="u", now=NOW, k=3)
    assert current.ids[0] == "job-now"
    assert past.ids[0] == "job-2019"
    assert plain.ids[0] == "job-2020"  # no intent: the best text match wins
    assert "recency 0.99^8 (age 3.0d, asks for recent)" in current[0].explain()
    assert "^-4" in past[0].explain() and "asks for past" in past[0].explain()
    assert "asks for" not in plain[0].explain()
    # The default config has no multiplier: the same questions keep the text order.
    default = Reranker()
    assert default.rerank("What is my current job?", cands, namespace="u", now=NOW,
                          k=3).ids[0] == "job-2020"


def test_intent_recency_is_validated() -> None:
    with pytest.raises(ConfigError, match="intent_recency"):
        Config(scoring=Scoring(intent_recency={"soon": 2.0}))
    with pytest.raises(ConfigError, match=r"intent_recency\['recent'\]"):
        Config(scoring=Scoring(intent_recency={"recent": math.nan}))
    with pytest.raises(ConfigError, match="intent_recency"):
        Config(scoring=Scoring(intent_recency=[("recent", 2.0)]))  # type: ignore[arg-type]


@given(st.text(max_size=200))
def test_question_readers_take_any_text(text: str) -> None:
    """Any string is a valid question: one person, one intent, never an error."""
    info = analyze_query(text)
    assert info.person in PERSONS and info.person == question_person(text)
    assert info.intent in ("recent", "past", "none") and info.intent == temporal_intent(text)
