"""Prompts that let the model cite what it used, so ``usage="citations"`` works with the default
query engine (its own prompt shows neither numbers nor ids)."""

from __future__ import annotations

from llama_index.core.prompts import PromptTemplate, PromptType

CITATION_QA_PROMPT_TMPL = (
    "Context information is below. Each source has a line 'citation: [n]'.\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query. Cite the sources "
    "you use by their citation, for example [1] or [1, 3].\n"
    "Query: {query_str}\n"
    "Answer: "
)


def citation_qa_template() -> PromptTemplate:
    """The default question-answering prompt, asking the model to cite ``[n]``.

    Use it with ``HeapRankPostprocessor(citations=True)``, which shows each node's ``[n]``:
    ``index.as_query_engine(node_postprocessors=[pp], text_qa_template=citation_qa_template())``.
    """
    return PromptTemplate(CITATION_QA_PROMPT_TMPL, prompt_type=PromptType.QUESTION_ANSWER)
