"""Deciding what an answer used: citations by id, alias or position; opt-in word overlap."""

from __future__ import annotations

import pytest

from heaprank.learning.attribution import Shown, citations_or_overlap, cited, overlapping

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
