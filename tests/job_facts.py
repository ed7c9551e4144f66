"""A fact stated three times over five months, among unrelated turns: what a "when" and a
"what" question about it rank differently by recency (tests of temporal intent and of
per-question-type weights)."""

from __future__ import annotations

NOW = 1_750_000_000.0
DAY = 86_400.0


def job_facts() -> list[dict[str, object]]:
    """A fact stated three times over five months (no supersede key), and unrelated turns.
    (Past the recency floor, about four half-lives, ages no longer differ in recency.)"""
    facts = [
        {"id": "job-2019", "text": "I work as a nurse at the city hospital", "score": 7.3,
         "metadata": {"created_at": NOW - 150 * DAY}},
        {"id": "job-2020", "text": "I work as a teacher at the high school", "score": 7.6,
         "metadata": {"created_at": NOW - 60 * DAY}},
        {"id": "job-now", "text": "I work as a baker in a small bakery", "score": 6.9,
         "metadata": {"created_at": NOW - 3 * DAY}},
    ]
    fillers = [{"id": f"f{i}", "text": f"We talked about topic {i}", "score": 1.0 + i / 10,
                "metadata": {"created_at": NOW - (i + 1) * 30 * DAY}} for i in range(10)]
    return facts + fillers
