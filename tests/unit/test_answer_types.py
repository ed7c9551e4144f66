"""Answer-type slots: each family says whether a memory holds that kind of answer, from its
form alone (never its words as features), one ``<family>:yes|no`` slot per family asked for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank.model.answer_types import ANSWER_FAMILIES, answer_slots
from heaprank.model.features import FIXED_SLOTS, shape_of


def holds(text: str) -> set[str]:
    return {s.split(":")[0] for s in answer_slots(text, ANSWER_FAMILIES) if s.endswith(":yes")}


@pytest.mark.parametrize(("text", "families"), [
    ("The dentist is at 9:40am on Tuesday", {"time", "wday"}),
    ("Dinner at 7 pm", {"time"}),
    ("The tickets cost $40 each", {"money"}),
    ("I paid 300 dollars for the bike", {"money"}),
    ("We have 3 kids and two dogs", {"count"}),
    ("I have been running for 3 years", {"dur"}),
    ("The course takes two weeks", {"dur"}),
    ("I'd give the movie 4 out of 5", {"rate"}),
    ("Rated it 8/10", {"rate"}),
    ("We moved to Lisbon last spring", {"place"}),
    ("Melanie painted a sunrise", set()),
])
def test_each_family_detects_its_kind_of_answer(text, families):
    assert holds(text) == families


@pytest.mark.parametrize(("text", "absent"), [
    ("I started two weeks ago", "dur"),  # a point in time, not a span
    ("See you in May", "place"),  # a month, not a place
    ("Call me on 555-0199", "money"),
    ("I'm 30 years old", "dur"),
])
def test_look_alikes_are_not_counted(text, absent):
    assert absent not in holds(text)


def test_a_slot_per_family_asked_in_the_order_asked():
    assert answer_slots("at noon in Paris", ("place", "time", "money")) == (
        "place:yes", "time:yes", "money:no")
    assert answer_slots("anything", ()) == ()


def test_shapes_carry_the_families_asked_for_after_the_fixed_slots():
    plain = shape_of("Lunch at 12:30 in Porto", None, None, frozenset(), ())
    with_answers = shape_of("Lunch at 12:30 in Porto", None, None, frozenset(), (),
                            ("time", "place", "rate"))
    assert with_answers.slots == plain.slots + ("time:yes", "place:yes", "rate:no")


def test_every_answer_slot_is_in_the_codebook():
    """Stored impressions code them in one byte, like the other fixed slots."""
    assert {f"{f}:{v}" for f in ANSWER_FAMILIES for v in ("yes", "no")} <= set(FIXED_SLOTS)


@given(st.text(max_size=300))
def test_any_text_gets_exactly_one_value_per_family(text):
    slots = answer_slots(text, ANSWER_FAMILIES)
    assert [s.rsplit(":", 1)[0] for s in slots] == list(ANSWER_FAMILIES)
    assert all(s.rsplit(":", 1)[1] in ("yes", "no") for s in slots)


def test_config_turns_families_on_and_feedback_learns_under_them():
    """With ``features.answer_slots`` a rerank's candidates carry the slots (crossed with the
    question type), and a feedback teaches the link of a ``when`` question to a time."""
    from heaprank import Config, Features, Reranker

    rr = Reranker(config=Config(features=Features(answer_slots=("time", "rate"))))
    cands = [{"id": "t", "text": "The dentist is at 9:40am", "score": 1.0},
             {"id": "r", "text": "I'd give the dentist 4 out of 5", "score": 1.0}]
    ranking = rr.rerank("When is my dentist appointment?", cands, namespace="ns", k=2)
    rr.feedback(ranking.recall_id, used=["t"])
    names = [link.feature for link in rr.links("ns")]
    assert "qt:when&time:yes" in names and "qt:when&rate:yes" in names
    again = rr.rerank("When is my dentist appointment?", cands, namespace="ns", k=2)
    assert [r.id for r in again] == ["t", "r"]


@pytest.mark.parametrize("bad", ["time", ("time", "weather"), ("time", "time"), (1,)])
def test_a_bad_family_list_is_a_config_error_naming_the_field(bad):
    from heaprank import ConfigError, Features

    with pytest.raises(ConfigError, match=r"features\.answer_slots"):
        Features(answer_slots=bad)
