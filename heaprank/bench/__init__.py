"""Benchmarks behind ``heaprank bench``: LoCoMo ranking quality and latency (``heaprank[bench]``).

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and imports its
heavy dependencies (bm25s, sentence-transformers, heapdb-memory) only inside ``run``.
"""

BENCHMARKS = {
    "locomo": ("heaprank.bench.locomo", "LoCoMo evidence retrieval, side by side with heapdb-memory"),
    "latency": ("heaprank.bench.latency", "rerank latency, feedback throughput and memory"),
}
