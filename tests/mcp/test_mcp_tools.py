"""The MCP tools through the SDK's in-memory client session: what each returns, and that bad
input is a tool error naming the field while the server goes on answering."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from heaprank import Reranker  # noqa: E402
from heaprank._checks import MAX_QUERY_CHARS  # noqa: E402
from heaprank.mcp import ServerOptions, build_server  # noqa: E402
from heaprank.mcp.models import MAX_CANDIDATES  # noqa: E402
from tests.mcp.conftest import candidates, session  # noqa: E402

QUERY = "When does Maya's flight leave?"


@pytest.fixture()
def server():
    with Reranker("memory://", strict=True) as reranker:
        yield build_server(reranker)


async def _rerank(client, **args):
    result = await client.call_tool("rerank", {"query": QUERY, "candidates": candidates(), **args})
    assert not result.is_error, result.content
    return result.structured_content


async def _error(client, tool, args) -> str:
    """The text of the tool error ``tool(args)`` answers; the session must answer again after."""
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None
    assert (await client.list_tools()).tools  # the server is still there
    return result.content[0].text


def test_tools_list_names_each_tool_with_a_schema_and_a_one_line_description(server):
    tools = session(server, lambda c: c.list_tools()).tools
    assert [t.name for t in tools] == ["rerank", "feedback", "why_not", "links", "stats"]
    for tool in tools:
        assert tool.description and "\n" not in tool.description
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    rerank = tools[0].input_schema
    assert rerank["required"] == ["query", "candidates"]
    item = rerank["$defs"]["CandidateIn"]
    assert item["required"] == ["id", "text"] and item["additionalProperties"] is False
    assert rerank["properties"]["candidates"]["maxItems"] == MAX_CANDIDATES
    assert set(tools[1].input_schema["properties"]) == {"recall_id", "used", "labels",
                                                        "feedback_id"}


def test_forget_namespace_is_offered_only_when_allowed():
    with Reranker("memory://") as reranker:
        allowed = build_server(reranker, ServerOptions(allow_forget=True))
        names = [t.name for t in session(allowed, lambda c: c.list_tools()).tools]
    assert names[-1] == "forget_namespace"


def test_rerank_returns_structured_results_with_scores_in_0_1_non_increasing(server):
    out = session(server, lambda c: _rerank(c, k=3))
    assert len(out["recall_id"]) >= 16 and out["namespace"] == "default"
    results = out["results"]
    assert [r["rank"] for r in results] == [1, 2, 3]
    scores = [r["score"] for r in results]
    assert scores[0] == 1.0 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    first = {c["id"]: n for n, c in enumerate(candidates(), 1)}
    assert all(r["first_stage_rank"] == first[r["id"]] for r in results)
    assert all("rel " in r["explain"] for r in results)
    assert set(results[0]["signals"]) >= {"relevance", "recency", "importance", "usefulness"}


def test_feedback_counts_what_it_recorded_per_verdict_and_a_retry_changes_nothing(server):
    async def script(client):
        out = await _rerank(client, k=4)
        shown = [r["id"] for r in out["results"]]
        args = {"recall_id": out["recall_id"], "used": [shown[1]],
                "labels": {shown[2]: "outdated", shown[3]: "wrong"}, "feedback_id": "answer-1"}
        first = await client.call_tool("feedback", args)
        again = await client.call_tool("feedback", args)
        other = await client.call_tool("feedback", {**args, "feedback_id": "answer-2"})
        return first.structured_content, again.structured_content, other.structured_content

    first, again, other = session(server, script)
    assert first["recorded"] == {"used": 1, "ignored": 1, "outdated": 1, "wrong": 1}
    assert (first["applied"], first["already_recorded"]) == (4, 0)
    assert again == first  # the same feedback_id: the same answer
    # another feedback_id with the same verdicts: nothing applied twice
    assert other["recorded"] == first["recorded"]
    assert (other["applied"], other["already_recorded"]) == (0, 4)


def test_feedback_teaches_links_and_the_next_rerank_uses_them(server):
    async def script(client):
        for _ in range(8):
            out = await _rerank(client, k=5)
            await client.call_tool("feedback", {"recall_id": out["recall_id"], "used": ["m3"]})
        links = (await client.call_tool("links", {"min_n": 1})).structured_content
        return links, await _rerank(client, k=5)

    links, after = session(server, script)
    assert links["namespace"] == "default" and links["total"] == len(links["links"]) > 0
    assert {"feature", "p", "n", "low", "high"} <= set(links["links"][0])
    assert links["links"][0]["p"] >= links["links"][-1]["p"]
    assert after["results"][0]["id"] == "m3"  # ranked 3rd by the retriever


def test_rerank_is_the_reranker_s_own_ranking(server):
    out = session(server, lambda c: _rerank(c, k=4))
    with Reranker("memory://") as twin:
        ranking = twin.rerank(QUERY, candidates(), k=4)
    assert [r["id"] for r in out["results"]] == ranking.ids
    assert [r["explain"] for r in out["results"]] == [r.explain() for r in ranking]
    assert [r["signals"] for r in out["results"]] == [dict(r.signals) for r in ranking]


def test_why_not_explains_a_candidate_left_out(server):
    async def script(client):
        out = await _rerank(client, k=2)
        left_out = next(c["id"] for c in candidates()
                        if c["id"] not in {r["id"] for r in out["results"]})
        why = await client.call_tool("why_not", {"recall_id": out["recall_id"], "id": left_out})
        return left_out, why.structured_content

    left_out, why = session(server, script)
    assert why["id"] == left_out and why["rank"] > 2 and why["score"] <= why["kth_score"]
    assert why["factor"] and left_out in why["message"]


def test_stats_gives_the_owner_the_counts_and_the_weights(server):
    async def script(client):
        await _rerank(client)
        return (await client.call_tool("stats", {})).structured_content

    stats = session(server, script)
    assert stats["counts"]["impressions"] == 1 and stats["weights"]["relevance"] > 0
    assert stats["weights_fitted"] is None


def test_forget_namespace_erases_what_was_learned_and_the_recent_rankings():
    async def script(client):
        out = await _rerank(client, namespace="user:maya")
        await client.call_tool("feedback", {"recall_id": out["recall_id"], "used": ["m1"]})
        before = (await client.call_tool("links", {"namespace": "user:maya"})).structured_content
        gone = await client.call_tool("forget_namespace", {"namespace": "user:maya"})
        after = (await client.call_tool("links", {"namespace": "user:maya"})).structured_content
        why = await _error(client, "why_not", {"recall_id": out["recall_id"], "id": "m5"})
        return before, gone.structured_content, after, why

    with Reranker("memory://") as reranker:
        server = build_server(reranker, ServerOptions(allow_forget=True))
        before, gone, after, why = session(server, script)
    assert before["total"] > 0 and gone == {"namespace": "user:maya", "forgotten": True}
    assert after["total"] == 0 and "not among this server's" in why


@pytest.mark.parametrize(("change", "field"), [
    (lambda c: [{k: v for k, v in c[0].items() if k != "id"}, *c[1:]], "candidates.0.id"),
    (lambda c: [{**c[0], "score": "high"}, *c[1:]], "candidates.0.score"),
    (lambda c: [{**c[0], "colour": "red"}, *c[1:]], "candidates.0.colour"),
    (lambda c: [{**c[0], "metadata": {"importance": 1e6}}, *c[1:]], "importance"),
    (lambda c: [c[0], {**c[1], "id": c[0]["id"]}], "candidates[1]"),
    (lambda c: [{**c[0], "text": "   "}, *c[1:]], "text"),
    (lambda c: [], "candidates"),
    (lambda c: c * (MAX_CANDIDATES // len(c) + 1), "candidates"),
])
def test_a_bad_candidate_is_a_tool_error_naming_its_field(server, change, field):
    async def script(client):
        args = {"query": QUERY, "candidates": change(candidates())}
        return await _error(client, "rerank", args), await _rerank(client)

    message, after = session(server, script)
    assert field in message and "Traceback" not in message
    assert after["results"]  # the next call works


@pytest.mark.parametrize(("args", "field"), [
    ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "query"),
    ({"k": 0}, "k"),
    ({"k": "many"}, "k"),
    ({"namespace": "*"}, "namespace"),
    ({"namespace": " "}, "namespace"),
])
def test_a_bad_query_k_or_namespace_is_a_tool_error_naming_it(server, args, field):
    message = session(server, lambda c: _error(
        c, "rerank", {"query": QUERY, "candidates": candidates(), **args}))
    assert message.startswith("Error executing tool rerank") and field in message


def test_bad_feedback_is_a_tool_error_naming_the_field(server):
    async def script(client):
        out = await _rerank(client, k=2)
        rid, shown = out["recall_id"], [r["id"] for r in out["results"]]
        errors = {
            "label": await _error(client, "feedback", {"recall_id": rid,
                                                       "labels": {shown[0]: "great"}}),
            "not shown": await _error(client, "feedback", {"recall_id": rid, "used": ["m5"]}),
            "unknown": await _error(client, "feedback", {"recall_id": "0123456789abcdef",
                                                         "used": ["m1"]}),
            "missing": await _error(client, "feedback", {"used": ["m1"]}),
            "contradiction": await _error(client, "feedback", {
                "recall_id": rid, "used": [shown[0]], "labels": {shown[0]: "wrong"}}),
        }
        await client.call_tool("feedback", {"recall_id": rid, "used": [shown[0]],
                                            "feedback_id": "f"})
        errors["reused id"] = await _error(client, "feedback", {
            "recall_id": rid, "used": [shown[1]], "feedback_id": "f"})
        return errors

    errors = session(server, script)
    assert "labels[" in errors["label"] and "'great'" in errors["label"]
    assert "'m5' was not shown" in errors["not shown"]
    assert "recall_id '0123456789abcdef': unknown" in errors["unknown"]
    assert "recall_id" in errors["missing"]
    assert "labels[" in errors["contradiction"]
    assert "feedback_id 'f'" in errors["reused id"]


def test_bad_why_not_is_a_tool_error_naming_the_field(server):
    async def script(client):
        out = await _rerank(client, k=2)
        rid, top = out["recall_id"], out["results"][0]["id"]
        return (await _error(client, "why_not", {"recall_id": rid, "id": top}),
                await _error(client, "why_not", {"recall_id": rid, "id": "nobody"}),
                await _error(client, "why_not", {"recall_id": "feedfeedfeedfeed", "id": "m1"}))

    shown, unknown, recall = session(server, script)
    assert shown.endswith("is in the top 2 (rank 1)") and "id:" in shown
    assert "'nobody' was not among the candidates" in unknown
    assert "recall_id 'feedfeedfeedfeed': not among this server's 512 most recent" in recall


def test_why_not_remembers_only_the_most_recent_rankings():
    async def script(client):
        first = await _rerank(client, k=1)
        await _rerank(client, k=1)
        await _rerank(client, k=1)
        return await _error(client, "why_not", {"recall_id": first["recall_id"], "id": "m5"})

    with Reranker("memory://") as reranker:
        server = build_server(reranker, ServerOptions(keep_rankings=2))
        assert "2 most recent rankings" in session(server, script)


def test_links_and_forget_refuse_a_bad_namespace(server):
    message = session(server, lambda c: _error(c, "links", {"namespace": ""}))
    assert "namespace: empty" in message


def test_the_answer_with_memory_prompt_tells_the_agent_the_loop(server):
    prompt = session(server, lambda c: c.get_prompt("answer_with_memory",
                                                    {"question": "Where is the hotel?"}))
    text = prompt.messages[0].content.text
    assert "Where is the hotel?" in text and "rerank" in text and "feedback(recall_id" in text
