"""One rerank, stage by stage, in pipeline order.

- :mod:`.candidates`: what the retriever handed in, checked and converted once into arrays;
- :mod:`.features`: the question's type and each candidate's shape, as interned feature rows;
- :mod:`.signals` and :mod:`.fusion`: relevance, recency, importance and the seed signals;
- :mod:`.rules`: the named multipliers (superseded, the caller's rules);
- :mod:`.spreading`: activation along co-use edges;
- :mod:`.results`: the ranked results with their EXPLAIN lines.
"""
