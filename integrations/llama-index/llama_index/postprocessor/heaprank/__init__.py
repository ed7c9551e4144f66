"""heaprank for LlamaIndex: re-rank retrieved nodes and learn which ones answers use.

- :class:`HeapRankPostprocessor`: a ``BaseNodePostprocessor`` for query and chat engines.
- :class:`HeapRankFeedbackHandler`: an instrumentation span handler that reports what each
  response used (query and chat engines, sync, async and streaming).
- :func:`citation_qa_template`: a query prompt that asks the model to cite ``[n]``.
"""

from heaprank.adapters import StateMismatchError, StateMismatchWarning, distribution_version

from .base import HeapRankPostprocessor
from .feedback import FeedbackReport, HeapRankFeedbackHandler
from .prompts import citation_qa_template

__version__ = distribution_version("llama-index-postprocessor-heaprank")

__all__ = [
    "FeedbackReport",
    "HeapRankFeedbackHandler",
    "HeapRankPostprocessor",
    "StateMismatchError",
    "StateMismatchWarning",
    "__version__",
    "citation_qa_template",
]
