"""Shared test parts: a deterministic embedding and a small memory store (real LangChain objects)."""

from __future__ import annotations

import hashlib
import math
import re

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

DAY = 86_400.0
NOW = 1_780_000_000.0


class HashedBagOfWords(Embeddings):
    """Deterministic embedding: each word adds 1 to a hashed slot; cosine then counts shared words."""

    def __init__(self, size: int = 256) -> None:
        self.size = size

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.size
        for word in re.findall(r"\w+", text.lower()):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.size] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


MEMORIES = [
    Document("Booked the flight to Lisbon, departs March 14 at 9:40", id="booked",
             metadata={"kind": "fact", "created_at": NOW - 20 * DAY}),
    Document("I have always wanted to see Lisbon, the flight photos look amazing", id="wish",
             metadata={"kind": "episode", "created_at": NOW - 22 * DAY}),
    Document("Flights to Lisbon usually cost 400 to 700 dollars", id="price",
             metadata={"kind": "tool_result", "created_at": NOW - 21 * DAY}),
    Document("The dentist appointment is on Tuesday", id="dentist",
             metadata={"kind": "fact", "created_at": NOW - 2 * DAY}),
]
