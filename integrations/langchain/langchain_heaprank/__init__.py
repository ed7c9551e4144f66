"""heaprank for LangChain: re-rank retrieved documents and learn which ones answers use.

- :class:`HeapRankReranker`: a ``BaseDocumentCompressor`` (works in ``ContextualCompressionRetriever``
  and ``DocumentCompressorPipeline``).
- :class:`HeapRankRetriever`: any retriever or vector store, re-ranked, as a Runnable for LCEL.
- :class:`HeapRankFeedbackHandler`: a callback handler that reports what each answer used.
"""

from importlib.metadata import PackageNotFoundError, version

from heaprank.adapters import StateMismatchError, StateMismatchWarning
from heaprank.learning.attribution import Shown, cited, overlapping

from .feedback import FeedbackReport, HeapRankFeedbackHandler
from .reranker import HeapRankReranker
from .retriever import HeapRankRetriever

try:
    __version__ = version("langchain-heaprank")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "FeedbackReport",
    "HeapRankFeedbackHandler",
    "HeapRankReranker",
    "HeapRankRetriever",
    "Shown",
    "StateMismatchError",
    "StateMismatchWarning",
    "__version__",
    "cited",
    "overlapping",
]
