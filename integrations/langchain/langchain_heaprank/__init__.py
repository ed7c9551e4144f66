"""heaprank for LangChain: re-rank retrieved documents and learn which ones answers use.

- :class:`HeapRankReranker`: a ``BaseDocumentCompressor`` (works in ``ContextualCompressionRetriever``
  and ``DocumentCompressorPipeline``).
- :class:`HeapRankRetriever`: any retriever or vector store, re-ranked, as a Runnable for LCEL.
- :class:`HeapRankFeedbackHandler`: a callback handler that reports what each answer used.
"""

from heaprank.adapters import StateMismatchError, StateMismatchWarning, distribution_version
from heaprank.learning.attribution import Shown, cited, covered, overlapping

from .feedback import FeedbackReport, HeapRankFeedbackHandler
from .reranker import HeapRankReranker
from .retriever import HeapRankRetriever

__version__ = distribution_version("langchain-heaprank")

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
    "covered",
    "overlapping",
]
