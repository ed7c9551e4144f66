"""Deciding what an answer used: citations by id, alias or position; the answer's coverage by
a shown text (abstaining below the bar); the app's embeddings; opt-in word overlap."""

from __future__ import annotations

import numpy as np
import pytest

from heaprank.learning.attribution import (
    Shown,
    citations_or_coverage,
    citations_or_overlap,
    cited,
    content_terms,
    coverage,
    covered,
    detect,
    overlapping,
    similar,
)

SHOWN = [
    Shown("lisbon-booked", ("D1:3",), "Booked the flight: SFO to LIS, departs March 14, 9:40am"),
    Shown("lisbon-price", (), "Flights to Lisbon usually run $400-700 round trip"),
    Shown("2", (), "A document whose id is the digit two"),
]


@pytest.mark.parametrize("answer, used", [
    ("Your flight leaves March 14 [lisbon-booked].", ["lisbon-booked"]),
    ("It leaves March 14 [D1:3].", ["lisbon-booked"]),  # an alias names the document
    ("See [1] and [lisbon-price, lisbon-booked].", ["lisbon-booked", "lisbon-price"]),
    ("Position [2] is not read as a position: an id named 2 wins [2].", ["2"]),
    ("Out of range [7], unknown [zzz], nothing cited.", []),
    ("No brackets at all.", []),
])
def test_citations(answer, used):
    assert cited(answer, SHOWN) == used


def test_overlap_needs_most_content_words_of_a_document():
    answer = "The flight departs March 14 from SFO."  # 3 of the 5 content words of the booking
    assert overlapping(answer, SHOWN) == ["lisbon-booked"]
    assert overlapping(answer, SHOWN, threshold=0.7) == []
    assert overlapping("", SHOWN) == []


def test_citations_first_then_overlap():
    detect = citations_or_overlap(0.5)
    assert detect("usually run $400-700 round trip to Lisbon [lisbon-booked]", SHOWN) == \
        ["lisbon-booked"]  # a citation wins over the overlap
    assert detect("Flights to Lisbon usually run $400-700 round trip", SHOWN) == ["lisbon-price"]


# ------------------------------------------------------------------ answer coverage

TRIP = [
    Shown("t1", (), "Caroline: I went to the LGBTQ support group yesterday, it was powerful."),
    Shown("t2", (), "Melanie: I painted a sunrise over the lake last year."),
    Shown("t3", (), "Caroline: I'm researching adoption agencies for my future family."),
]


def test_coverage_is_the_share_of_the_answers_content_terms_each_text_holds():
    assert coverage("Adoption agencies", TRIP) == [0.0, 0.0, 1.0]
    # "sunrise" and "painted" in t2; "canvas" nowhere: 2 of 3
    assert coverage("She painted a sunrise on canvas", TRIP)[1] == pytest.approx(2 / 3)


def test_content_terms_keep_numbers_and_drop_short_and_function_words():
    assert content_terms("The 7 pianos were there in 2023!") == {"7", "piano", "2023"}


def test_covered_picks_the_best_covered_text():
    assert covered("Adoption agencies", TRIP) == ["t3"]
    assert covered("a sunrise, painted", TRIP) == ["t2"]


def test_covered_keeps_ties():
    shown = [Shown("a", (), "we adopted a puppy"), Shown("b", (), "the puppy is small"),
             Shown("c", (), "nothing here")]
    assert covered("A puppy", shown) == ["a", "b"]


def test_covered_abstains_when_no_text_reaches_the_bar():
    assert covered("Psychology and counseling certification", TRIP) is None
    assert covered("She painted a sunrise on canvas", TRIP, threshold=0.7) is None
    assert covered("", TRIP) is None  # no content term: nothing to attribute
    assert covered("Adoption agencies", []) is None


def test_the_questions_own_words_are_left_out_of_the_answer():
    question = "Where did Caroline go?"
    restated = "Caroline went to the LGBTQ support group."
    # "caroline" is the question's: without it t3 covers nothing of the answer
    assert coverage(restated, TRIP) == [1.0, 0.0, pytest.approx(1 / 5)]
    assert coverage(restated, TRIP, question=question) == [1.0, 0.0, 0.0]
    # an answer made only of the question's words says nothing of its own: abstain
    assert covered("Caroline did go", TRIP, question="What did Caroline go to?") is None


@pytest.mark.parametrize("bad, error", [(0.0, ValueError), (1.5, ValueError),
                                        ("half", TypeError), (True, TypeError)])
def test_a_bad_threshold_is_named(bad, error):
    with pytest.raises(error, match="threshold"):
        covered("Adoption agencies", TRIP, threshold=bad)
    with pytest.raises(error, match="threshold"):
        citations_or_coverage(bad)


# ------------------------------------------------------------------ the default detector

def test_default_is_citations_first_then_coverage_then_abstain():
    default = citations_or_coverage()
    assert default("Adoption agencies [t1]", TRIP) == ["t1"]  # a citation wins
    assert default("Adoption agencies", TRIP) == ["t3"]
    assert default("Psychology", TRIP) is None  # abstain: record no feedback


def test_detect_passes_the_question_to_detectors_that_take_it():
    seen = []

    def plain(answer, shown):
        return []

    def aware(answer, shown, *, question=""):
        seen.append(question)
        return []

    assert detect(plain, "x", TRIP, question="q?") == []
    assert detect(aware, "x", TRIP, question="q?") == [] and seen == ["q?"]
    # the default detector reads it: "Caroline" no longer counts for t1 and t3
    assert detect(citations_or_coverage(), "Caroline, support group", TRIP,
                  question="Where did Caroline go?") == ["t1"]


# ------------------------------------------------------------------ the app's embeddings

def _bag_of_words(texts):
    vocab = sorted({w for t in texts for w in content_terms(t)})
    return np.array([[float(w in content_terms(t)) for w in vocab] for t in texts])


def test_similar_picks_the_most_similar_texts_above_the_bar():
    detector = similar(_bag_of_words, threshold=0.3)
    assert detector("researching adoption agencies", TRIP) == ["t3"]
    assert detector("quantum chromodynamics", TRIP) is None  # below the bar: abstain
    assert similar(_bag_of_words, threshold=0.01, margin=1.0)("sunrise", TRIP) == \
        ["t1", "t2", "t3"]  # the margin keeps every text near the best


def test_similar_names_a_bad_embedding_function_or_bar():
    with pytest.raises(TypeError, match="embed"):
        similar("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="margin"):
        similar(_bag_of_words, margin=-0.1)
    with pytest.raises(ValueError, match="embed"):
        similar(lambda texts: np.zeros((1, 3)))("answer", TRIP)


# ------------------------------------------------------------------ what the adapters use

def test_the_adapters_named_usages():
    from heaprank.adapters import DEFAULT_USAGE, usage_detector

    default, name = usage_detector(DEFAULT_USAGE, 0.5)
    assert name == "citations+coverage"
    assert detect(default, "Adoption agencies", TRIP) == ["t3"]
    assert detect(default, "Psychology", TRIP) is None
    coverage_only, _ = usage_detector("coverage", 0.5)
    # the question reaches the coverage detector through detect(): "caroline" is left out
    assert detect(coverage_only, "Caroline", TRIP) == ["t1", "t3"]
    assert detect(coverage_only, "Caroline", TRIP, question="Who is Caroline?") is None
    with pytest.raises(ValueError, match="usage"):
        usage_detector("guess", 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overlap_threshold"):
        usage_detector("citations+coverage", 2.0)
