"""heaprank for LlamaIndex: re-rank retrieved nodes and learn which ones answers use.

- :class:`HeapRankPostprocessor`: a ``BaseNodePostprocessor`` for query and chat engines.
- :class:`HeapRankFeedbackHandler`: an instrumentation span handler that reports what each
  response used (query and chat engines, sync, async and streaming).
"""

from .base import HeapRankPostprocessor
from .feedback import HeapRankFeedbackHandler

__all__ = ["HeapRankFeedbackHandler", "HeapRankPostprocessor"]
