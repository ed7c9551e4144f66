"""A scripted agent that reaches heaprank over MCP: rerank, answer citing ids, feedback; then the
server restarts and what it learned still orders memories it has never seen.

The agent speaks to ``heaprank mcp`` (a subprocess over stdio, as an MCP client such as Claude
Desktop starts it) through the MCP SDK's client. Its retriever scores memories by shared words,
so chatter that repeats the question's words outranks the note that answers it; its "LLM" is a
script that answers from the result holding a date and cites that result's id. Feedback on a
handful of "when" questions teaches heaprank that, for such questions, dated facts the user
wrote get used; after a restart (a new server process on the same SQLite file) a question about
memories never ranked before gets its dated fact first.

Install: pip install 'heaprank[mcp]'
Run:     python examples/mcp_agent.py [state.db]
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

NAMESPACE = "user:maya"
DAY = 86_400
NOW = 1_767_225_600  # 2026-01-01


def memory(id: str, text: str, kind: str, source: str, days_ago: float) -> dict[str, Any]:
    return {"id": id, "text": text,
            "metadata": {"kind": kind, "source": source, "created_at": NOW - days_ago * DAY}}


#: What Maya's memory store holds; per question, the dated fact that answers it comes second
#: for the retriever, after chatter that repeats the question's words.
STORE = [
    memory("dentist-booked", "My dentist appointment is on 12 March at 10:30", "fact", "user", 20),
    memory("dentist-chat", "my dentist appointment again, when is it, I never know", "chat",
           "assistant", 2),
    memory("lisbon-booked", "My flight TP1351 to Lisbon leaves on 3 May at 09:40", "fact", "user",
           30),
    memory("lisbon-chat", "you asked when your flight to Lisbon does leave", "chat", "assistant",
           1),
    memory("sam-party", "Sam's birthday party is on 21 June at 19:00", "fact", "user", 12),
    memory("sam-chat", "when is Sam's birthday party, you wondered", "chat", "assistant", 3),
    memory("deadline", "The project report is due 30 April, 17:00", "fact", "user", 40),
    memory("deadline-chat", "the project deadline is when, we talked about it", "chat",
           "assistant", 5),
    memory("window-seat", "Maya prefers a window seat on every flight", "preference", "user", 60),
    memory("sam-brother", "Sam is Maya's younger brother", "fact", "user", 90),
    memory("gym", "The gym is on Rua Augusta, open until 22:00", "fact", "user", 45),
    memory("weather", "It was raining when we talked about the trip", "chat", "assistant", 4),
]
QUESTIONS = ["When is my dentist appointment?", "When does my flight to Lisbon leave?",
             "When is Sam's birthday party?", "When is the project deadline?"]
#: Added to the store after the restart: memories heaprank has never ranked.
NEW_QUESTION = "When is my car service?"
NEW_MEMORIES = [memory("car-service", "My car service is on 2 April at 08:00", "fact", "user", 15),
                memory("car-chat", "when is my car service, when is it", "chat", "assistant", 1)]


def retrieve(question: str, store: list[dict[str, Any]], k: int = 6) -> list[dict[str, Any]]:
    """The first stage: the ``k`` memories sharing most of the question's words, with the
    share as their score."""
    words = set(re.findall(r"\w+", question.lower()))
    scored = [{**m, "score": len(words & set(re.findall(r"\w+", m["text"].lower())))
               / len(words)} for m in store]
    return sorted(scored, key=lambda m: -m["score"])[:k]


def answer(results: list[dict[str, Any]]) -> tuple[str, str]:
    """The scripted "LLM": answers from the first result that holds a date, citing its id."""
    dated = next(r for r in results if re.search(r"\d", r["text"]))
    return f"{dated['text']} [{dated['id']}]", dated["id"]


async def ask(client: Client, question: str, store: list[dict[str, Any]]) -> list[str]:
    """One turn: retrieve, rerank over MCP, answer citing an id, send feedback. The order."""
    candidates = retrieve(question, store)
    ranked = (await client.call_tool("rerank", {"query": question, "candidates": candidates,
                                                "k": 3})).structured_content
    texts = {c["id"]: c["text"] for c in candidates}
    results = [{**r, "text": texts[r["id"]]} for r in ranked["results"]]
    reply, cited = answer(results)
    fed = (await client.call_tool("feedback", {"recall_id": ranked["recall_id"],
                                               "used": [cited]})).structured_content
    print(f"  {question}\n    retriever: {[c['id'] for c in candidates]}\n"
          f"    heaprank:  {[r['id'] for r in results]}\n    answer:    {reply}   "
          f"(feedback: {fed['recorded']['used']} used, {fed['recorded']['ignored']} ignored)")
    return [r["id"] for r in results]


def server(state: str) -> StdioServerParameters:
    """``heaprank mcp`` over stdio, as an MCP client's configuration starts it."""
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "heaprank", "mcp", "--state", state, "--namespace", NAMESPACE,
        "--log-level", "WARNING"])


async def main(state: str) -> None:
    print("Server 1: the agent answers four questions three times, with feedback each time")
    async with Client(server(state)) as client:
        for _ in range(3):
            for question in QUESTIONS:
                await ask(client, question, STORE)
    print("\nServer 2 (a new process on the same state): a question about new memories")
    async with Client(server(state)) as client:
        order = await ask(client, NEW_QUESTION, STORE + NEW_MEMORIES)
        links = (await client.call_tool("links", {"min_n": 2})).structured_content
    print("\n  what it learned (strongest links of the namespace):")
    for link in links["links"][:5]:
        print(f"    {link['feature']:<22} P(useful) {link['p']:.2f}   n {link['n']:.1f}")
    print(f"\n  first for the new question: {order[0]} (the retriever put it "
          f"{[c['id'] for c in retrieve(NEW_QUESTION, STORE + NEW_MEMORIES)].index(order[0]) + 1})")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(f"sqlite:///{Path(sys.argv[1]).resolve()}"))
    else:
        with tempfile.TemporaryDirectory(prefix="heaprank-mcp-agent-") as tmp:
            asyncio.run(main(f"sqlite:///{tmp}/agent.db"))
