"""heaprank in a dozen lines: re-rank what a retriever returned, read EXPLAIN, give feedback.

Run: python examples/quickstart.py
"""

from heaprank import Reranker

DAY = 86_400
NOW = 1_780_000_000 + 30 * DAY

candidates = [  # what BM25 or a vector store returned, with its scores
    {"id": "wish", "text": "I have always wanted to see Lisbon, the flights look amazing",
     "score": 9.1, "metadata": {"kind": "episode", "created_at": NOW - 22 * DAY}},
    {"id": "price", "text": "Flights to Lisbon usually run $400-700 round trip",
     "score": 8.7, "metadata": {"kind": "tool_result", "created_at": NOW - 21 * DAY}},
    {"id": "booked", "text": "Booked the flight: SFO to LIS, departs March 14, 9:40am",
     "score": 6.0, "metadata": {"kind": "fact", "created_at": NOW - 20 * DAY}},
]

with Reranker("sqlite:///quickstart.db") as rr:
    ranking = rr.rerank("When is my flight to Lisbon?", candidates, namespace="user:maya",
                        k=2, now=NOW)
    for r in ranking:
        print(r.rank, f"{r.score:.3f}", r.id, "|", r.explain())
    print(ranking.why_not("booked"))
    rr.feedback(ranking.recall_id, used=[ranking[0].id])  # the answer used the first one
    print(rr.links("user:maya")[:3])
