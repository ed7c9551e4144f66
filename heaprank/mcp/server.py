"""The MCP server: :class:`~heaprank.mcp.tools.Tools` registered on the SDK's ``MCPServer``,
served over stdio or streamable HTTP (path ``/mcp``).

Each registered function only reads who is calling (:func:`caller_of`) and hands its typed
arguments to the tools; the SDK builds each tool's JSON schema from its signature and sends the
returned model as structured content.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import AnyHttpUrl, ConfigDict, Field

from .._checks import MAX_NAMESPACE_CHARS
from .._version import __version__
from ..errors import InputError
from ..reranker import Reranker
from .models import (
    Candidates,
    FeedbackOut,
    ForgetOut,
    LinksOut,
    RerankOut,
    StatsOut,
    WhyNotOut,
)
from .stdio import run_stdio
from .tenants import Caller, TokenTable
from .tools import Tools

#: What an agent reads when it connects (the ``answer_with_memory`` prompt says it at length).
INSTRUCTIONS = (
    "heaprank re-ranks what your retriever found and learns which kinds of memories answers "
    "use. Call rerank with the question and the retrieved candidates, answer from the top "
    "results citing their ids, then call feedback with the recall_id and the ids you used "
    "(labels can mark others outdated or wrong). Use why_not to ask why a candidate was left "
    "out, links to see what was learned.")

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

Namespace = Annotated[str | None, Field(description=(
    "Whose learned links to use (one user or agent); omitted: this connection's default."))]
RecallId = Annotated[str, Field(description="The recall_id rerank returned.")]


class TenantToken(AccessToken):
    """A bearer token of the tokens file, with the caller it stands for."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    caller: Caller


class TokenFile:
    """The SDK's token verifier over a :class:`TokenTable`: a token the file holds, else None
    (the SDK then answers 401)."""

    def __init__(self, table: TokenTable) -> None:
        self.table = table

    async def verify_token(self, token: str) -> AccessToken | None:
        caller = self.table.caller(token)
        if caller is None:
            return None
        return TenantToken(token=token, client_id=caller.label, scopes=[], caller=caller)


def caller_of(ctx: Context, owner: Caller) -> Caller:
    """Who makes this call: the bearer token's caller over HTTP with tokens, else ``owner``
    (stdio, HTTP on loopback without tokens, ``MCPServer.call_tool`` in process: the owner)."""
    try:
        request: Any = ctx.request_context.request
    except ValueError:  # called in process, outside any request
        return owner
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser) and isinstance(user.access_token, TenantToken):
        return user.access_token.caller
    return owner


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How a server is built.

    Attributes:
        namespace: The owner's default namespace (over stdio, or HTTP without tokens).
        allow_forget: Offer ``forget_namespace`` (a caller may forget only what it may name).
        keep_rankings: How many recent rankings ``why_not`` can explain.
        tokens: The bearer tokens over HTTP; None: no token is asked for (loopback only).
        url: The server's own address (what the tokens are issued for), when served over HTTP.
        log_level: The SDK's and the HTTP server's log level.
    """

    namespace: str = "default"
    allow_forget: bool = False
    keep_rankings: int = 512
    tokens: TokenTable | None = None
    url: str = "http://127.0.0.1"
    log_level: str = "INFO"


def build_server(reranker: Reranker, options: ServerOptions | None = None) -> MCPServer:
    """An ``MCPServer`` whose tools go through ``reranker`` (it stays open: closing it is the
    caller's)."""
    options = options or ServerOptions()
    owner = Caller(options.namespace)
    auth: dict[str, Any] = {}
    if options.tokens is not None:
        auth = {"token_verifier": TokenFile(options.tokens),
                # (the tokens' issuer is this server's own tokens file: no OAuth routes)
                "auth": AuthSettings(issuer_url=AnyHttpUrl(options.url), resource_server_url=None)}
    server: MCPServer = MCPServer("heaprank", version=__version__, instructions=INSTRUCTIONS,
                                  log_level=options.log_level,  # type: ignore[arg-type]
                                  **auth)
    _register(server, Tools(reranker, keep_rankings=options.keep_rankings), owner,
              options.allow_forget)
    return server


def _register(server: MCPServer, tools: Tools, owner: Caller, allow_forget: bool) -> None:
    """The tools (``forget_namespace`` only if allowed) and the prompt."""

    @server.tool(description="Re-rank retrieved candidates for a question; returns a recall_id "
                 "for feedback and, per result, a [0, 1] score and why it ranks there.")
    async def rerank(query: Annotated[str, Field(description="The user's question.")],
                     candidates: Candidates, ctx: Context, namespace: Namespace = None,
                     k: Annotated[int, Field(description="How many results to return.")] = 10,
                     ) -> RerankOut:
        return await tools.rerank(caller_of(ctx, owner), query, candidates, namespace, k)

    @server.tool(description="After answering, report which results of a rerank the answer "
                 "used (the others count as ignored) so future rankings learn; safe to retry.",
                 annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    async def feedback(recall_id: RecallId, ctx: Context,
                       used: Annotated[list[str] | None, Field(
                           description="Ids of shown results the answer used.")] = None,
                       labels: Annotated[dict[str, str] | None, Field(
                           description="Id -> used | ignored | outdated (a newer version "
                           "should have won) | wrong, for shown results.")] = None,
                       feedback_id: Annotated[str | None, Field(
                           max_length=MAX_NAMESPACE_CHARS,
                           description="Your id for this feedback: a retry with it gets the "
                           "same answer.")] = None) -> FeedbackOut:
        return await tools.feedback(caller_of(ctx, owner), recall_id, used, labels, feedback_id)

    @server.tool(description="Explain why a candidate of a recent rerank was not among the "
                 "results: the signal that cost it most.", annotations=_READ_ONLY)
    async def why_not(recall_id: RecallId, id: Annotated[str, Field(
            description="The candidate's id.")], ctx: Context) -> WhyNotOut:
        return await tools.why_not(caller_of(ctx, owner), recall_id, id)

    @server.tool(description="List learned links (feature -> P(useful), evidence n, 90% "
                 "interval), strongest first; namespace '*' is the pooled layer.",
                 annotations=_READ_ONLY)
    async def links(ctx: Context, namespace: Namespace = None,
                    min_n: Annotated[float, Field(description="Only links with at least this "
                                                  "much evidence.")] = 0.0) -> LinksOut:
        return await tools.links(caller_of(ctx, owner), namespace, min_n)

    @server.tool(description="The ranking weights in use and their last fit (and, for the "
                 "server's owner, what the learned state holds).", annotations=_READ_ONLY)
    async def stats(ctx: Context) -> StatsOut:
        return await tools.stats(caller_of(ctx, owner))

    if allow_forget:
        _register_forget(server, tools, owner)
    _register_prompt(server)


def _register_forget(server: MCPServer, tools: Tools, owner: Caller) -> None:
    @server.tool(description="Erase everything learned for a namespace (its links, documents "
                 "and recalls); cannot be undone.",
                 annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def forget_namespace(namespace: Annotated[str, Field(
            description="The namespace to erase.")], ctx: Context) -> ForgetOut:
        return await tools.forget_namespace(caller_of(ctx, owner), namespace)


def _register_prompt(server: MCPServer) -> None:
    @server.prompt(description="How to answer a question with heaprank: rerank, answer citing "
                   "ids, then feedback.")
    def answer_with_memory(question: str) -> str:
        return (f"{INSTRUCTIONS}\n\nQuestion: {question}\n\n1. Retrieve candidates for the "
                "question with your memory or search tool.\n2. Call rerank(query, candidates) "
                "and read the results best first; each explain says why it ranks there.\n3. "
                "Answer from the results, citing the id of each one you rely on as [id].\n4. "
                "Call feedback(recall_id, used=[the ids you cited]); add labels for results "
                "that were outdated or wrong.")


def check_bind(host: str, tokens: TokenTable | None) -> None:
    """Refuse to serve a non-loopback address without tokens.

    Raises:
        InputError: ``host`` is not a loopback address (or ``localhost``) and there are no
            tokens.
    """
    if tokens is not None:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InputError(f"--http: {host!r} is not a loopback address; serving it would let "
                         "anyone who reaches it read and change what was learned: pass --tokens "
                         "FILE (or bind 127.0.0.1)")


async def serve(server: MCPServer, reranker: Reranker, http: tuple[str, int] | None) -> None:
    """Serve ``server`` over stdio until stdin closes, or over streamable HTTP at
    ``http://host:port/mcp`` until interrupted; then close ``reranker`` (with the state's
    async client of this event loop)."""
    try:
        if http is None:
            await run_stdio(server)
        else:
            import uvicorn

            host, port = http
            app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
            config = uvicorn.Config(app, host=host.strip("[]"), port=port,
                                    log_level=server.settings.log_level.lower())
            await uvicorn.Server(config).serve()
    finally:
        await reranker.aclose()
