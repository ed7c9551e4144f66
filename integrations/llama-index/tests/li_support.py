"""Shared test parts, all on LlamaIndex's own base classes: a deterministic embedding and an LLM
that answers by citing a source position."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

DAY = 86_400.0
NOW = 1_780_000_000.0


class HashedBagOfWords(BaseEmbedding):
    """Each word adds 1 to a hashed slot; cosine similarity then counts shared words."""

    size: int = 256

    @classmethod
    def class_name(cls) -> str:
        return "HashedBagOfWords"

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.size
        for word in re.findall(r"\w+", text.lower()):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.size] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class CitingLLM(CustomLLM):
    """Answers with a fixed text (``answer``) and records every prompt it was given."""

    answer: str = "See [1]."
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        self.prompts.append(prompt)

        def tokens() -> CompletionResponseGen:
            text = ""
            for word in self.answer.split(" "):
                delta = word if not text else " " + word
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return tokens()


class NeedleCitingLLM(CustomLLM):
    """Answers by citing the source that holds ``needle``, by the number the prompt shows before
    it (``citation: [n]`` from heaprank, ``Source n:`` from CitationQueryEngine), if any."""

    needle: str = "March 14"
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="needle-citing-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        at = prompt.find(self.needle)
        numbers = re.findall(r"citation: \[(\d+)\]|Source (\d+):", prompt[:max(at, 0)])
        cite = f" [{''.join(numbers[-1])}]" if at >= 0 and numbers else ""
        return CompletionResponse(text=f"It departs {self.needle}{cite}.")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.complete(prompt).text
        yield CompletionResponse(text=text, delta=text)


def memories() -> list[Document]:
    return [
        Document(text="Booked the flight to Lisbon, departs March 14 at 9:40", doc_id="booked",
                 metadata={"kind": "fact", "created_at": NOW - 20 * DAY}),
        Document(text="I have always wanted to see Lisbon, the flight photos look amazing",
                 doc_id="wish", metadata={"kind": "episode", "created_at": NOW - 22 * DAY}),
        Document(text="Flights to Lisbon usually cost 400 to 700 dollars", doc_id="price",
                 metadata={"kind": "tool_result", "created_at": NOW - 21 * DAY}),
        Document(text="The dentist appointment is on Tuesday", doc_id="dentist",
                 metadata={"kind": "fact", "created_at": NOW - 2 * DAY}),
    ]
