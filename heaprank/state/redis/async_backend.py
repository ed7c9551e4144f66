"""The async Redis client: the hot path of :class:`~heaprank.state.redis.backend.RedisState` on
``redis.asyncio``, for ``Reranker.arerank`` and ``afeedback``.

It runs the same operations (:mod:`.ops`: keys, scripts, Cluster routing, reply parsing)
under the same failure policy (:mod:`.connect`: retries with backoff for idempotent calls
only, every Redis error a ``StateUnavailableError``), awaiting each round trip instead of
blocking a thread. It does what a rerank and a feedback need (read, with the co-use edges when
asked, impressions, feedback, with the co-use update when the batch carries one, the periodic
prune); audit, forget and copy stay on the sync client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import StateUnavailableError
from ...model.evidence import DocStats, EdgeRows, LinkCounts
from ...records import EdgeState, Impression, Update
from . import edges as redis_assoc
from . import ops as redis_ops
from .connect import PRUNE_EVERY, RedisClientBase, RedisOptions, connect_async
from .flow import adrive
from .layout import redis_options
from .ops import Request
from .pooled import PooledCache, push

if TYPE_CHECKING:
    from typing_extensions import Unpack

_ASYNC_CONNECTION = ("redis", "asyncio", "connection.py")


def _torn_down_under_a_write(exc: BaseException) -> bool:
    """Whether ``exc`` came out of redis-py's asyncio connection code, which (redis-py 8.1)
    raises AttributeError or TypeError instead of ConnectionError when a connection is closed
    while a command is written to it (redis/redis-py#3546, #4287): a lost connection, retried
    like any other."""
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).parts[-3:] == _ASYNC_CONNECTION:
            return True
        tb = tb.tb_next
    return False


class AsyncRedisState(RedisClientBase):
    """Learned state in Redis, through ``redis.asyncio`` (an :class:`AsyncStateBackend` and an
    :class:`AsyncEdgeBackend`).

    Usually obtained from a :class:`~heaprank.state.redis.backend.RedisState` (``async_backend()``,
    which ``Reranker.arerank``/``afeedback`` call); it can also be opened alone with
    :meth:`from_url`. Its connection pool belongs to the event loop that first uses it.

    Args:
        url: As for ``RedisState`` (``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``),
            without query options (see :meth:`from_url`).
        client: An existing ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``
            (``decode_responses=False``) instead of ``url``.
        prefix, global_shards, timeout_s, retries, global_cache_ttl_s, max_impressions,
        impression_ttl_s: As for ``RedisState``; a state's clients must agree on them.
    """

    def __init__(self, url: str | None = None, *, client: Any = None,
                 _cache: PooledCache | None = None, _seen: set[int] | None = None,
                 **options: Unpack[RedisOptions]) -> None:
        self._setup(url, client, connect_async, options, _cache)
        if _seen is not None:
            self.seen = _seen  # the buckets its sync state registered
        self._prune_every = PRUNE_EVERY
        self.checked = _cache is not None  # a twin's layout was checked by its sync state
        #: One per connection: a round trip waits here for a free one (at most
        #: ``pool_timeout_s``), so a burst of coroutines queues instead of failing.
        self._free = asyncio.Semaphore(self.pool.max_connections)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AsyncRedisState:
        """Open from a URL whose query string may carry this class's options (as ``RedisState``)."""
        base, ours = redis_options(url)
        return cls(base, **{**ours, **options})

    # ------------------------------------------------------------ connection

    async def _send(self, request: Request) -> Any:
        """Send one round trip once a connection is free (see :meth:`_connection`)."""
        await self._connection()
        try:
            return await self._send_now(request)
        finally:
            self._free.release()

    async def _connection(self) -> None:
        """Wait for a free connection: up to ``pool_timeout_s``, then StateUnavailableError
        (not retried: the wait was the retry)."""
        try:
            await asyncio.wait_for(self._free.acquire(), self.pool.timeout_s)
        except TimeoutError:
            raise StateUnavailableError(
                f"Redis state: no connection free within {self.pool.timeout_s:g} s "
                f"(max_connections={self.pool.max_connections}; raise it, or pool_timeout, "
                f"in the URL)") from None

    async def _send_now(self, request: Request) -> Any:
        try:
            return await request.send(self.client)
        except self.failures.no_script:
            loaded = request.load(self.client)  # type: ignore[union-attr]  # scripts only
            if isinstance(loaded, list):
                await asyncio.gather(*loaded)
            else:
                await loaded
            return await request.send(self.client)
        except (AttributeError, TypeError) as exc:
            if not _torn_down_under_a_write(exc):
                raise
            raise self.failures.connection_error("connection closed during a write") from exc

    async def _run(self, what: str, flow: Callable[[], redis_ops.Op], *, idempotent: bool) -> Any:
        """Run an operation of :mod:`.ops` (a fresh flow for every attempt)."""
        self.refuse_writes(what)
        if not self.checked:
            await self._check_meta()
        attempt, since = 0, time.monotonic()
        while True:
            try:
                return await adrive(flow(), self._send)
            except self.failures.caught as exc:
                if self.moved_on(exc):  # a reshard moved shards: placed again, run again
                    placement = await adrive(redis_ops.load_placement(self.layout), self._send)
                    wait = self.placed_again(what, exc, since, placement)
                    since = since if wait else time.monotonic()  # (it moved on: wait anew)
                    await asyncio.sleep(wait)
                    continue
                await asyncio.sleep(self.failures.wait_s(what, exc, attempt, idempotent=idempotent))
                attempt += 1

    async def _check_meta(self) -> None:
        self.checked = True  # before the call: _run would check again
        try:
            placed = await self._run("open", lambda: redis_ops.check_layout(
                self.layout, "AsyncRedisState", self.where() if self.read_only else None),
                idempotent=True)
        except BaseException:
            self.checked = False
            raise
        self.adopt(placed)

    # ------------------------------------------------------------ the hot path

    async def read(self, namespace: str, features: Sequence[str],
                   ids: Sequence[str]) -> tuple[LinkCounts, DocStats]:
        """Everything a rerank reads, in one round trip."""
        counts, docs, _ = await self._read(namespace, features, ids, False)
        return counts, docs

    async def read_with_edges(self, namespace: str, features: Sequence[str],
                              ids: Sequence[str]) -> tuple[LinkCounts, DocStats, EdgeRows]:
        """:meth:`read` plus the co-use edges among ``ids``, in the same round trip."""
        return await self._read(namespace, features, ids, True)

    async def _read(self, namespace: str, features: Sequence[str], ids: Sequence[str],
                    with_edges: bool) -> tuple[LinkCounts, DocStats, EdgeRows]:
        found: tuple[LinkCounts, DocStats, EdgeRows] = await self._run("read", lambda: redis_ops.read(
            self.layout, self.cache, self.cluster, namespace, features, ids, with_edges),
            idempotent=True)
        return found

    async def put_impression(self, impression: Impression, *,
                             feedback_id: str | None = None) -> str | None:
        """Record an impression (see ``StateBackend.put_impression``); idempotent, so retried."""
        held: str | None = await self._run("put_impression", lambda: redis_ops.put_impression(
            self.layout, self.cluster, impression, feedback_id, self.impression_ttl_s, self.seen),
            idempotent=True)
        return held

    async def get_impression(self, recall_id: str) -> Impression | None:
        found: Impression | None = await self._run("get_impression", lambda: redis_ops.get_impression(
            self.layout, self.cluster, recall_id, self.impression_ttl_s), idempotent=True)
        return found

    async def list_edges(self, namespace: str) -> list[tuple[str, str, float, float, float]]:
        """Every co-use edge of ``namespace`` (as ``RedisState.list_edges``)."""
        found: list[tuple[str, str, float, float, float]] = await self._run(
            "list_edges", lambda: redis_assoc.list_edges(self.layout, namespace), idempotent=True)
        return found

    async def edge_state(self, namespace: str, docs: Sequence[str]) -> EdgeState:
        """The co-use edges of ``docs`` in ``namespace``, their version and count."""
        found: EdgeState = await self._run("edge_state", lambda: redis_assoc.edge_state(
            self.layout, namespace, docs), idempotent=True)
        return found

    async def read_links(self, namespace: str, features: Sequence[str]) -> LinkCounts:
        return (await self._read(namespace, features, [], False))[0]

    async def apply(self, updates: Sequence[Update]) -> list[bool]:
        """Apply feedback updates, each in one script, atomically (see ``RedisState.apply``)."""
        return [await self._apply(update) for update in updates]

    async def _apply(self, update: Update) -> bool:
        applied, entry = await self._run("feedback", lambda: redis_ops.apply_update(
            self.layout, self.cluster, update, self.cache, self.seen, self.impression_ttl_s),
            idempotent=True)
        if self.queue(entry, time.monotonic()):
            await self.push()
        if applied and next(self._feedbacks) % self._prune_every == 1:
            await self.prune()
        return bool(applied)

    async def prune(self) -> None:
        """Drop the oldest impressions with feedback past ``max_impressions``."""
        await self._run("prune", lambda: redis_ops.prune(self.layout, self.max_impressions),
                        idempotent=True)

    async def push(self) -> None:
        """Push the pooled deltas of this client's feedbacks still waiting (a Cluster)."""
        entries = self.take_outbox()
        if entries:
            try:
                await self._run("push", lambda: push(self.layout, entries, self.cluster),
                                idempotent=True)
            except BaseException:
                self.restore(entries)  # kept in the buckets' outboxes too: none is lost
                raise
            self.settled(entries)  # applied and gone from their outboxes

    async def aclose(self) -> None:
        """Push the waiting pooled deltas, release the connection pool."""
        try:
            if self.outbox:
                await self.push()
        finally:
            await self.client.aclose()
            if self.reader is not self.client:
                await self.reader.aclose()
