"""The time of heaprank's calls: rerank and feedback latency beside heapdb-memory on one
synthetic workload (:mod:`benchmarks.speed.workload`, timed by :mod:`benchmarks.speed.timing`),
profiles, the C kernels' shares, re-fits, and the event loop of the async paths."""
