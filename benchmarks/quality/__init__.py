"""Ranking quality: LoCoMo evidence retrieval and the test sets written into its format.

Every benchmark here runs on :mod:`benchmarks.quality.harness` (the data, the candidates, the
simulated feedback, the metrics and the tables), so a protocol is written once.
"""
