"""What feedback teaches, and how it is read back.

- :mod:`.links`: Beta links with a pooled prior, noisy-OR usefulness, EM credit;
- :mod:`.co_use`: Hebbian co-use edges between documents used together;
- :mod:`.retention`: Ebbinghaus retention and the forget policy;
- :mod:`.attribution`: which shown items an answer used;
- :mod:`.choices` and :mod:`.tuning`: the impression log as choices, and the weights fitted to it;
- :mod:`.evaluation`: read-only views of a state for leave-one-out evaluation.
"""
