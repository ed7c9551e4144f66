"""Connections of the Redis backend: clients from URLs (sync and ``redis.asyncio``, a server or
a Cluster) and the one failure policy both clients follow.

redis-py's own retries are turned off: this policy retries only idempotent calls (reads, an
impression write, a feedback, which the scripts make idempotent), after errors that say the
server was not reached or not ready (connection lost, timeout, Cluster down or moving, a
replica not yet promoted), waiting 50 ms, 100 ms, 200 ms, ... (at most the timeout) between
attempts; every Redis error that is left becomes :class:`~heaprank.errors.StateUnavailableError`.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from types import ModuleType
from typing import Any, TypedDict, cast
from urllib.parse import parse_qsl, urlsplit

from ..._optional import require
from ..._time import DAY_S
from ...errors import ConfigError, StateReadOnlyError, StateUnavailableError
from .layout import CLUSTER_SCHEME, KeyLayout, Placement
from .pooled import Entry, LayoutChanged, PooledCache, decode_entry, moved_on

#: First wait before a retry, doubled at each further attempt.
FIRST_BACKOFF_S = 0.05
#: A prune of the fed impressions runs after every this many applied feedbacks of a client.
PRUNE_EVERY = 256
#: A Cluster client pushes its feedbacks' pooled deltas in batches of this many (or once the
#: oldest has waited PUSH_AFTER_S): fewer round trips, fewer writes to the pooled shards.
PUSH_EVERY = 16
PUSH_AFTER_S = 0.25
#: How long a call waits for pooled shards a reshard froze before it gives up (a push: its
#: entries wait in their outboxes).
FROZEN_WAIT_S = 2.0
#: Entry ids a client remembers having pushed.
REMEMBERED = 65_536
#: The calls that write: refused by a state opened read-only (``mode=ro``).
WRITES = frozenset({"put_impression", "feedback", "prune", "forget_namespace", "clear",
                    "import_state"})
_DB = re.compile(r"[0-9]{1,9}")
_PASSWORD = re.compile(r"(//[^:/@]*:)[^@/]*@")


def shown_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, for messages."""
    return _PASSWORD.sub(r"\1***@", url)


def check_url(url: str) -> None:
    """Refuse a database number that is not a whole number (``redis://host/abc``: redis-py
    would use db 0 silently), in the URL path or a ``db=`` option, and any db but 0 in a
    Cluster (which has db 0 only)."""
    parts = urlsplit(url)
    found = [("the URL path", parts.path[1:])] if parts.scheme in ("redis", "rediss") \
        and parts.path not in ("", "/") else []
    found += [("the db= option", v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
              if k == "db"]
    for where, db in found:
        if not _DB.fullmatch(db):
            raise ConfigError(f"state: database {db!r} in {where} of {shown_url(url)!r} is not "
                              f"a whole number; use redis://host:port/0 (or 1, 2, ...)")
    if url.startswith(CLUSTER_SCHEME) and parts.path not in ("", "/", "/0"):
        raise ConfigError(f"state: {shown_url(url)!r}: a Redis Cluster has database 0 only; "
                          f"drop {parts.path!r} from the URL")


def _built(make: Callable[[], Any], url: str) -> Any:
    """A client from ``make()``, with redis-py's refusals of the URL as one-line errors: an
    option it does not know is a ConfigError, a server that is not a Cluster (for
    ``redis+cluster://``) or no node reachable a StateUnavailableError."""
    redis = redis_module("RedisState")
    try:
        client = make()
        pool = getattr(client, "connection_pool", None)
        if pool is not None:  # builds a connection object (no socket): unknown options fail
            pool.connection_class(**pool.connection_kwargs)
        return client
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"state: {shown_url(url)!r}: {exc}") from None
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        if "Cluster mode is not enabled" in str(exc):
            raise ConfigError(f"state: {shown_url(url)!r}: the server is not a Redis Cluster; "
                              f"use redis://host:port/db") from None
        raise StateUnavailableError(f"Redis state: cannot open {shown_url(url)!r}: "
                                    f"{type(exc).__name__}: {exc}") from None


class RedisOptions(TypedDict, total=False):
    """The keyword options of ``RedisState`` and ``AsyncRedisState`` (see ``RedisState``)."""

    prefix: str
    global_shards: int
    timeout_s: float
    retries: int
    global_cache_ttl_s: float | None
    max_impressions: int
    impression_ttl_s: float
    read_only: bool
    replica_url: str | None
    read_from_replicas: bool
    eviction: str
    max_connections: int
    pool_timeout_s: float


@dataclass(frozen=True)
class Settings:
    """:class:`RedisOptions` with their defaults filled in and checked."""

    prefix: str = "heaprank"
    global_shards: int = 32
    timeout_s: float = 2.0
    retries: int = 2
    global_cache_ttl_s: float | None = None
    max_impressions: int = 100_000
    impression_ttl_s: float = DAY_S / 24  # an hour: see docs/redis.md, "Sizing"
    read_only: bool = False
    replica_url: str | None = None
    read_from_replicas: bool = False
    eviction: str = "warn"
    max_connections: int = 100
    pool_timeout_s: float = 10.0

    @classmethod
    def of(cls, name: str, options: RedisOptions) -> Settings:
        unknown = sorted(set(options) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"{name}: unknown option {unknown[0]!r}")
        settings = cls(**options)
        if isinstance(settings.max_impressions, bool) \
                or not isinstance(settings.max_impressions, int) or settings.max_impressions < 1:
            raise ValueError("max_impressions: must be an int >= 1")
        if not (isinstance(settings.impression_ttl_s, (int, float))
                and settings.impression_ttl_s > 0):
            raise ValueError("impression_ttl_s: must be > 0")
        if settings.eviction not in ("warn", "strict", "ignore"):
            raise ValueError("eviction: must be warn, strict or ignore")
        if isinstance(settings.max_connections, bool) \
                or not isinstance(settings.max_connections, int) or settings.max_connections < 1:
            raise ValueError("max_connections: must be an int >= 1")
        if isinstance(settings.pool_timeout_s, bool) \
                or not isinstance(settings.pool_timeout_s, (int, float)) \
                or not 0 < settings.pool_timeout_s < float("inf"):
            raise ValueError("pool_timeout_s: must be a number of seconds > 0")
        return settings

    def options(self) -> RedisOptions:
        """These settings as keyword options (what a twin client is opened with)."""
        return cast(RedisOptions, asdict(self))


def redis_module(feature: str) -> ModuleType:
    """redis-py, or a MissingDependencyError naming the extra."""
    return require("redis", extra="redis", feature=feature)


def _options(redis: ModuleType, retry_module: Any, timeout_s: float) -> dict[str, Any]:
    no_retry = retry_module.Retry(redis.backoff.NoBackoff(), 0)
    return {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "retry": no_retry,
            "decode_responses": False}


@dataclass(frozen=True)
class PoolSize:
    """How many connections a client opens (per node in a Cluster), and how long a call waits
    for one when all are busy before it fails (StateUnavailableError)."""

    max_connections: int = 100
    timeout_s: float = 10.0


def connect(url: str, timeout_s: float, replicas: bool = False,
            pool: PoolSize = PoolSize()) -> Any:
    """A ``redis.Redis`` on a blocking connection pool (a call waits up to ``pool.timeout_s``
    for a free connection), or ``redis.cluster.RedisCluster`` for ``redis+cluster://``, reading
    from replicas with ``replicas``."""
    check_url(url)
    redis = redis_module("RedisState")
    options = _options(redis, redis.retry, timeout_s)
    if url.startswith(CLUSTER_SCHEME):
        cluster = require("redis.cluster", extra="redis", feature="RedisState")
        if replicas:
            options["load_balancing_strategy"] = cluster.LoadBalancingStrategy.ROUND_ROBIN
        return _built(lambda: cluster.RedisCluster.from_url(
            "redis://" + url[len(CLUSTER_SCHEME):], **options), url)
    return _built(lambda: redis.Redis.from_pool(redis.BlockingConnectionPool.from_url(
        url, retry_on_timeout=False, max_connections=pool.max_connections,
        timeout=pool.timeout_s, **options)), url)


def connect_async(url: str, timeout_s: float, replicas: bool = False,
                  pool: PoolSize = PoolSize()) -> Any:
    """The ``redis.asyncio`` twin of :func:`connect`: its own connection pool, on the event
    loop that first uses it (``pool.max_connections`` per node in a Cluster; the caller,
    :class:`~.async_backend.AsyncRedisState`, makes a call wait for a free one)."""
    check_url(url)
    redis = redis_module("AsyncRedisState")
    aio = require("redis.asyncio", extra="redis", feature="AsyncRedisState")
    options = _options(redis, require("redis.asyncio.retry", extra="redis", feature="AsyncRedisState"),
                       timeout_s)
    if url.startswith(CLUSTER_SCHEME):
        if replicas:
            sync = require("redis.cluster", extra="redis", feature="AsyncRedisState")
            options["load_balancing_strategy"] = sync.LoadBalancingStrategy.ROUND_ROBIN
        return aio.RedisCluster.from_url("redis://" + url[len(CLUSTER_SCHEME):],
                                         max_connections=pool.max_connections, **options)
    return aio.Redis.from_pool(aio.BlockingConnectionPool.from_url(
        url, retry_on_timeout=False, max_connections=pool.max_connections,
        timeout=pool.timeout_s, **options))


def is_cluster(client: Any) -> bool:
    """Whether a client (sync or async) talks to a Redis Cluster."""
    sync = require("redis.cluster", extra="redis", feature="RedisState")
    aio = require("redis.asyncio", extra="redis", feature="AsyncRedisState")
    return isinstance(client, (sync.RedisCluster, aio.RedisCluster))


class FailurePolicy:
    """Which errors a client retries, how long it waits, and what it raises in the end."""

    def __init__(self, retries: int, timeout_s: float) -> None:
        errors = redis_module("RedisState").exceptions
        self.retries = int(retries)
        self.timeout_s = float(timeout_s)
        #: Everything a call may raise that means "Redis failed": a socket torn down mid-reply
        #: is an OSError; a Cluster client that lost a node's slots (a master killed, its replica
        #: not yet promoted) raises a RedisClusterException, which is no RedisError.
        self.errors: tuple[type[BaseException], ...] = (errors.RedisError,
                                                        errors.RedisClusterException, OSError)
        #: ``errors`` and :class:`LayoutChanged` (the pooled layer placed again: a reshard).
        self.caught: tuple[type[BaseException], ...] = (LayoutChanged, *self.errors)
        self._transient = (errors.ConnectionError, errors.TimeoutError, errors.ClusterDownError,
                           errors.TryAgainError, errors.ReadOnlyError,
                           errors.RedisClusterException, OSError)
        self.no_script = errors.NoScriptError
        self.connection_error = errors.ConnectionError

    def wait_s(self, what: str, exc: BaseException, attempt: int, *, idempotent: bool) -> float:
        """Seconds to wait before attempt ``attempt + 1`` of a call that raised ``exc``, or
        raise :class:`StateUnavailableError` when it must not (or may no more) be retried."""
        if idempotent and attempt < self.retries and isinstance(exc, self._transient):
            return float(min(FIRST_BACKOFF_S * 2 ** attempt, self.timeout_s))
        raise StateUnavailableError(f"Redis state: {what} failed: {type(exc).__name__}: {exc}") \
            from None


class RedisClientBase:
    """What the sync and the async client hold alike: the key layout, the options, the
    failure policy and the redis-py client (made from ``url`` by ``connect_fn``, or given)."""

    def _setup(self, url: str | None, client: Any, connect_fn: Callable[..., Any],
               options: RedisOptions, cache: PooledCache | None = None) -> None:
        name = type(self).__name__
        if (url is None) == (client is None):
            raise ConfigError(f"{name}: pass exactly one of url or client")
        self.settings = settings = Settings.of(name, options)
        self.layout = KeyLayout(settings.prefix, settings.global_shards)
        self.url = url
        self.timeout_s = float(settings.timeout_s)
        self.failures = FailurePolicy(settings.retries, self.timeout_s)
        self.max_impressions = settings.max_impressions
        self.impression_ttl_s = float(settings.impression_ttl_s)
        self.pool = PoolSize(settings.max_connections, float(settings.pool_timeout_s))
        self.client = client if client is not None else connect_fn(
            url or "", self.timeout_s, settings.read_from_replicas, self.pool)
        self.cluster = is_cluster(self.client)
        #: Where reads go: a replica (``replica_url``) or the client itself.
        self.reader = self.client if settings.replica_url is None else connect_fn(
            settings.replica_url, self.timeout_s, False, self.pool)
        check_s = settings.global_cache_ttl_s
        if check_s is None:  # a Cluster checks the pooled versions once a second by default
            check_s = 1.0 if self.cluster else 0.0
        self.cache = cache if cache is not None else PooledCache(check_s)
        #: Buckets this process listed in the registry; outbox entries waiting for a push.
        self.seen: set[int] = set()
        self.outbox: list[Entry] = []
        self.taken: dict[str, None] = {}  # ids of entries taken for a push, oldest first
        self.outbox_since = 0.0
        if self.client.get_encoder().decode_responses:
            raise ConfigError(f"{name}: the client must use decode_responses=False")
        self._feedbacks = itertools.count(1)
        self.read_only = settings.read_only

    def adopt(self, placement: Placement | None) -> bool:
        """Place the pooled shards as ``placement`` says (read from ``P:meta``: a state
        resharded, or a reshard's progress); the pooled counts cached are dropped. Returns
        whether anything changed."""
        if placement is None or placement == self.layout.placement:
            return False
        self.layout = KeyLayout(self.layout.prefix, placement.shards, placement)
        self.cache.clear()
        return True

    moved_on = staticmethod(moved_on)

    def placed_again(self, what: str, exc: BaseException, since: float,
                     placement: Placement) -> float:
        """After ``exc`` (:meth:`moved_on`): adopt the ``placement`` just read; seconds to wait
        before the next attempt (0 if it moved on; a shard frozen by a reshard, or a replica
        behind: 10 ms, up to :data:`FROZEN_WAIT_S` since ``since``, the last time it moved on,
        then StateUnavailableError)."""
        if self.adopt(placement):
            return 0.0
        if time.monotonic() - since > FROZEN_WAIT_S:
            raise StateUnavailableError(f"Redis state: {what} failed: the pooled layer is "
                                        f"being resharded: {exc}") from None
        return 0.01

    def new_recall_id(self, namespace: str) -> str:
        """A fresh recall id for ``namespace`` (the capability ``RecallIds``): 20 hex digits,
        the last 4 its bucket, so its impression is found without a pointer."""
        return self.layout.mint(namespace)

    def refuse_writes(self, what: str) -> None:
        """Raise StateReadOnlyError for a call that writes (``what`` in :data:`WRITES`) on a
        state opened read-only."""
        if self.read_only and what in WRITES:
            raise StateReadOnlyError(f"Redis state {self.where()} is open read-only ({what})")

    def where(self) -> str:
        """The state's URL for messages (password hidden), or "(a client)"."""
        return repr(shown_url(self.url)) if self.url is not None else "(a client)"

    @property
    def prefix(self) -> str:
        return self.layout.prefix

    @property
    def n_shards(self) -> int:
        return self.layout.n_shards

    @property
    def retries(self) -> int:
        return self.failures.retries

    @property
    def global_cache_ttl_s(self) -> float:
        return self.cache.ttl_s

    def queue(self, entry: Entry | None, now: float) -> bool:
        """Keep an outbox entry for the next push; whether a push is due (a batch of
        :data:`PUSH_EVERY`, or the oldest waiting :data:`PUSH_AFTER_S`)."""
        if entry is not None and entry.id not in self.taken \
                and all(e.id != entry.id for e in self.outbox):
            if not self.outbox:
                self.outbox_since = now
            self.outbox.append(entry)
            self.cache.add_pending(decode_entry(entry.blob))
        return bool(self.outbox) and (len(self.outbox) >= PUSH_EVERY
                                      or now - self.outbox_since >= PUSH_AFTER_S)

    def take_outbox(self) -> list[Entry]:
        """The waiting entries, for a push; their ids are remembered (the last
        :data:`REMEMBERED` of them), so a feedback retried meanwhile, which finds its entry
        still in the outbox, does not queue it again."""
        entries, self.outbox = self.outbox, []
        for entry in entries:
            self.taken[entry.id] = None
        while len(self.taken) > REMEMBERED:
            del self.taken[next(iter(self.taken))]
        return entries

    def restore(self, entries: list[Entry]) -> None:
        """Entries whose push failed: waiting again, first."""
        for entry in entries:
            self.taken.pop(entry.id, None)
        self.outbox[:0] = entries

    def settled(self, entries: list[Entry]) -> None:
        """Entries pushed: their deltas now come from the shards."""
        for entry in entries:
            self.cache.settle(decode_entry(entry.blob), self.layout.shard_of)

    def __repr__(self) -> str:
        kind = "cluster" if self.cluster else "server"
        return f"{type(self).__name__}({kind}, prefix={self.prefix!r}, global_shards={self.n_shards})"
