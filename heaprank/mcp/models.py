"""What the MCP tools take and return, as pydantic models: the SDK derives each tool's input
and output JSON schema from them, and a result is sent as structured content.

The models declare types and shapes only. What a valid candidate, label, namespace or ``k`` is
stays the core's to decide (its errors name the field); the one bound set here is
:data:`MAX_CANDIDATES`, a request-size limit of the server that the core does not have.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

#: Most candidates one ``rerank`` call may send: a bound on what one request makes the server
#: hold (and keep for ``why_not``). A retriever's candidate list is tens to hundreds.
MAX_CANDIDATES = 2_000


class CandidateIn(BaseModel):
    """One candidate from the agent's retriever."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id of the memory or document; feedback names it.")
    text: str = Field(description="What the model would read.")
    score: Annotated[float | None, Field(strict=True)] = Field(
        None, description="The retriever's similarity score; omit it on every candidate to rank "
        "by list position.")
    metadata: dict[str, Any] | None = Field(
        None, description="Shape fields heaprank reads: created_at (epoch s or ISO 8601), kind, "
        "source, importance (0-10], key, version, tags, thread, position, superseded, "
        "source_count, confidence.")


Candidates = Annotated[list[CandidateIn], Field(max_length=MAX_CANDIDATES, description=(
    "The retriever's candidates, best first: [{id, text, score?, metadata?}]."))]


class Result(BaseModel):
    """One re-ranked candidate."""

    id: str
    rank: int = Field(description="1 for the best.")
    score: float = Field(description="heaprank's score relative to the best: 1.0 for rank 1, in "
                         "[0, 1], non-increasing with rank.")
    first_stage_rank: int = Field(description="Its position in the candidates as sent (1-based).")
    explain: str = Field(description="Why it ranks here: each signal, its source, learned links.")
    signals: dict[str, float] = Field(description="Signal name -> its value before weighting.")


class RerankOut(BaseModel):
    recall_id: str = Field(description="Pass it to feedback (and why_not) about this ranking.")
    namespace: str
    results: list[Result]


class FeedbackOut(BaseModel):
    recall_id: str
    recorded: dict[str, int] = Field(description="How many items this feedback names per verdict "
                                     "(used, ignored, outdated, wrong), now recorded.")
    applied: int = Field(description="Items whose verdict this call wrote.")
    already_recorded: int = Field(description="Items whose verdict was recorded before (a retry).")
    feedback_id: str | None = None


class WhyNotOut(BaseModel):
    id: str
    rank: int | None = Field(description="Its rank among all candidates; null if a rule dropped it.")
    score: float
    kth_score: float = Field(description="The score of the last result returned.")
    factor: str = Field(description="The signal (or 'rules') that cost it most.")
    message: str


class LinkOut(BaseModel):
    feature: str
    p: float = Field(description="P(useful | feature), the posterior mean.")
    n: float = Field(description="Evidence behind it.")
    low: float
    high: float


class LinksOut(BaseModel):
    namespace: str = Field(description="The namespace, or '*' for the pooled layer.")
    total: int = Field(description="Links with at least min_n evidence (the strongest are listed).")
    links: list[LinkOut]


class StatsOut(BaseModel):
    counts: dict[str, Any] | None = Field(description="What the state holds, across every "
                                          "namespace (null for a tenant's token).")
    weights: dict[str, float] = Field(description="The weights rankings use now.")
    weights_fitted: dict[str, Any] | None = Field(description="Their last fit, if any (null "
                                                  "for a tenant's token).")


class ForgetOut(BaseModel):
    namespace: str
    forgotten: bool
