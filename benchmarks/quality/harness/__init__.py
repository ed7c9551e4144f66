"""The LoCoMo harness every quality benchmark shares (docs/design.md, "Evaluation").

- :mod:`.data`: ``locomo10.json`` read into turns and questions, and each question's candidates
  (BM25, dense, their union);
- :mod:`.runner`: the candidates as heaprank sees them, the simulated feedback (oracle and
  noisy), training and evaluation of a reranker, the weight grid;
- :mod:`.metrics`: reciprocal rank, Recall@k and paired bootstrap intervals;
- :mod:`.report`: the per-question score table of a run, its rows' statistics and the text
  tables;
- :mod:`.options`: what the commands share: where the data is, the development split, Config
  rows given as JSON, writing ``--out``.
"""
