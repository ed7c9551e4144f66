"""What the framework packages share (``langchain-heaprank``, ``llama-index-postprocessor-heaprank``).

Framework-free, so both adapters (and your own glue) open the learned state, compare two states,
score in [0, 1], decide "used" and write feedback the same way:

- :func:`open_engine`: a :class:`~heaprank.Reranker` from a state URL, an engine, or ``None``,
  which means ``$HEAPRANK_STATE``, else ``sqlite:///heaprank.db`` in the working directory (the
  command line's default too, so ``heaprank links`` reads what an app learned). Learning is
  never kept in memory unless asked for (``"memory://"``).
- :func:`state_url` / :class:`EngineSpec`: the URL an engine's state can be reopened from, for
  pickling an adapter; :func:`state_key` / :func:`surely_different`: whether two engines can
  share feedback (a ranking's recall id is known only to the state that recorded it).
- :func:`relative_scores`: heaprank's product scores as a relevance in [0, 1], non-increasing
  with rank (the best is 1.0), for the frameworks' ``relevance_score`` and ``NodeWithScore.score``.
- :class:`FeedbackWriter`: ``feedback`` from sync code, ``afeedback`` in a task from a running
  event loop; a failure is logged at WARNING with its reason and counted, never swallowed, and
  an answer that cites nothing after a prompt that showed no id to cite (:func:`shows_citable_ids`)
  is skipped and counted, never recorded as "nothing was used"; so is an answer whose detector
  abstains (:meth:`FeedbackWriter.abstain`); :func:`usage_detector` (from
  :mod:`~heaprank.learning.attribution`) names the ways "used" is decided.
- :class:`LoopClients`: releases a Redis state's async client of each event loop when that loop
  ends (``asyncio.run``), so ``ainvoke`` / ``aquery`` leave no unclosed connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import sys
import threading
import warnings
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any
from urllib.parse import urlencode

from ._checks import check_namespace
from .config import Config
from .errors import ConfigError, HeapRankError
from .learning.attribution import DEFAULT_USAGE as DEFAULT_USAGE
from .learning.attribution import Detector as Detector
from .learning.attribution import Shown
from .learning.attribution import Usage as Usage
from .learning.attribution import usage_detector as usage_detector
from .records import FeedbackOutcome
from .reranker import Reranker
from .scoring.candidates import DEFAULT_FIELD_KEYS
from .scoring.explain import NO_CONTENT
from .scoring.results import Ranked
from .scoring.rules import Rule
from .state import MemoryState, SQLiteState

#: The state an adapter opens when given none: the command line's default too.
DEFAULT_STATE_URL = "sqlite:///heaprank.db"
STATE_ENV = "HEAPRANK_STATE"



class StateMismatchError(ConfigError):
    """A feedback handler and a reranker that do not share one learned state."""


class StateMismatchWarning(UserWarning):
    """Rankings reach a feedback handler of another state: their feedback cannot be recorded."""


def canonical_url(url: str) -> str:
    """``url`` with a SQLite path made absolute, so a copy opened elsewhere finds the same file."""
    if not url.startswith("sqlite:"):
        return url
    from .state import sqlite_path

    path, query = sqlite_path(url), url.partition("?")[2]
    if path != ":memory:":
        path = os.path.abspath(os.path.expanduser(path))
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def default_state_url() -> str:
    """``$HEAPRANK_STATE``, else ``sqlite:///heaprank.db`` in the working directory (absolute)."""
    return canonical_url(os.environ.get(STATE_ENV) or DEFAULT_STATE_URL)


def open_engine(state: str | Reranker | None, *, owner: str, config: Config | None = None) -> Reranker:
    """The engine of ``state``: a URL, a :class:`Reranker` (used as is) or ``None`` (the default).

    Raises:
        TypeError: ``state`` is neither (named after ``owner``, e.g. ``HeapRankReranker.state``).
        ConfigError: an unknown or malformed URL, or ``config`` with an engine (it has its own).
    """
    if isinstance(state, Reranker):
        if config is not None:
            raise ConfigError(f"{owner}: config= goes with a state URL; an engine has its own "
                              "(Reranker(url, config=...))")
        return state
    if state is None:
        return Reranker(default_state_url(), config=config)
    if isinstance(state, str):
        return Reranker(canonical_url(state), config=config)
    raise TypeError(f"{owner}: expected a state URL (str) or a heaprank.Reranker, got "
                    f"{type(state).__name__}")


def state_url(engine: Reranker) -> str | None:
    """The URL ``engine``'s state reopens from, or ``None`` (in memory, or a client object)."""
    state = engine.state
    if isinstance(state, SQLiteState):
        if state.path == ":memory:":
            return None
        options = {"mode": "ro" if state.read_only else "rwc", "synchronous": state.synchronous,
                   "busy_timeout": f"{state.busy_timeout_s:g}",
                   "max_impressions": str(state.max_impressions),
                   "impression_ttl": f"{state.impression_ttl_s:g}"}
        return f"sqlite:///{os.path.abspath(state.path)}?{urlencode(options)}"
    url = getattr(state, "url", None)
    layout = getattr(state, "layout", None)
    if isinstance(url, str) and layout is not None:  # a RedisState opened from a URL
        options = {"prefix": layout.prefix, "global_shards": str(layout.n_shards),
                   "timeout": f"{state.timeout_s:g}",  # type: ignore[attr-defined]
                   "max_impressions": str(state.max_impressions),  # type: ignore[attr-defined]
                   "impression_ttl": f"{state.impression_ttl_s:g}"}  # type: ignore[attr-defined]
        return url + ("&" if "?" in url else "?") + urlencode(options)
    return None


def state_key(engine: Reranker) -> str:
    """An opaque name of ``engine``'s state (no path or password in it): equal for two engines
    on one state; ``memory:`` and ``object:`` keys name one state object."""
    state = engine.state
    if isinstance(state, SQLiteState) and state.path != ":memory:":
        where = "sqlite:" + os.path.realpath(state.path)
    elif isinstance(getattr(state, "url", None), str) and getattr(state, "layout", None) is not None:
        where = f"redis:{state.url.partition('?')[0]}#{state.layout.prefix}"  # type: ignore[attr-defined]
    else:
        kind = "memory" if isinstance(state, (MemoryState, SQLiteState)) else "object"
        return f"{kind}:{id(state):x}"
    return "url:" + hashlib.sha256(where.encode("utf-8")).hexdigest()[:16]


def surely_different(a: str, b: str) -> bool:
    """Whether states of keys ``a`` and ``b`` cannot share feedback (two client objects may
    still reach one server: those are not "surely" different)."""
    return a != b and not (a.startswith("object:") or b.startswith("object:"))


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """What reopens an engine in another process: its state URL and its settings."""

    url: str
    config: Config
    rules: tuple[Rule, ...]
    strict: bool

    @classmethod
    def of(cls, engine: Reranker, *, owner: str) -> EngineSpec:
        """The spec of ``engine``.

        Raises:
            ConfigError: its state has no URL: a copy would start empty, its learning lost.
        """
        url = state_url(engine)
        if url is None:
            raise ConfigError(f"{owner}: the state {engine.state!r} has no URL to reopen, so a "
                              "copy would start with nothing learned; give state='sqlite:///...' "
                              "or a redis:// URL")
        return cls(url, engine.config, tuple(engine.rules), engine.strict)

    def open(self) -> Reranker:
        return Reranker(self.url, config=self.config, rules=self.rules, strict=self.strict)


class BoundState:
    """The engine an adapter ranks with, bound to one state: opened from ``state=``, with the
    URL it reopens from (``None``: a state object without one), its :func:`state_key`, and its
    twin for ``strict`` (``on_invalid="raise"``) on the same state."""

    def __init__(self, engine: Reranker, url: str | None) -> None:
        self.engine = engine
        self.url = url
        self.key = state_key(engine)
        self._twins: dict[str, Reranker] = {}

    @classmethod
    def open(cls, state: str | Reranker | None, *, owner: str,
             config: Config | None = None) -> BoundState:
        """See :func:`open_engine`; a given engine's URL is derived from its state."""
        engine = open_engine(state, owner=owner, config=config)
        if isinstance(state, Reranker):
            memory = state_key(engine).startswith("memory:")
            return cls(engine, state_url(engine) or ("memory://" if memory else None))
        return cls(engine, canonical_url(state) if state is not None else default_state_url())

    def ranking(self, strict: bool) -> Reranker:
        """The engine with ``on_invalid`` set by ``strict`` (same state, rules and config)."""
        wanted = "raise" if strict else "neutral"
        if self.engine.config.inputs.on_invalid == wanted:
            return self.engine
        if wanted not in self._twins:
            self._twins[wanted] = self.engine.with_config(inputs={"on_invalid": wanted})
        return self._twins[wanted]


def check_metadata_keys(keys: Mapping[str, str | None],
                        defaults: Mapping[str, str | None]) -> dict[str, str | None]:
    """``keys`` (candidate field -> metadata key) over ``defaults``.

    Raises:
        ValueError: a field heaprank does not read (the message lists the ones it does).
    """
    known = frozenset(DEFAULT_FIELD_KEYS)
    unknown = set(keys) - known
    if unknown:
        raise ValueError(f"metadata_keys: unknown heaprank field(s) {sorted(unknown)}; "
                         f"expected some of {sorted(known)}")
    return {**defaults, **keys}


def explained(ranking: Sequence[Ranked], extra: Mapping[str, Sequence[str]],
              logger: logging.Logger) -> list[str]:
    """Each item's EXPLAIN line with what the adapter set aside (``extra[id]``) after ``!``.

    Logs once per call, not once per document: a flag every item carries (the state was
    unavailable, the rerank was not recorded) at WARNING once, a document's own flags (its
    metadata) at WARNING with its id; "query has no content words" only at DEBUG (EXPLAIN says
    it, and a short question is no fault).
    """
    lines, flagged = [], []
    for item in ranking:
        mine = list(extra.get(item.id, ()))
        line = item.explain()
        if mine:
            line += (" ! " if " ! " not in line else "; ") + "; ".join(mine)
        lines.append(line)
        flagged.append((item.id, [f for f in (*item.flags, *mine) if f != NO_CONTENT]))
    if any(NO_CONTENT in item.flags for item in ranking):
        logger.debug("heaprank: %s", NO_CONTENT)
    shared = set.intersection(*(set(f) for _, f in flagged)) if len(flagged) > 1 else set()
    for flag in sorted(shared):
        logger.warning("heaprank: %s", flag)
    for doc_id, flags in flagged:
        own = [f for f in flags if f not in shared]
        if own:
            logger.warning("heaprank: %s: %s", doc_id, "; ".join(own))
    return lines


#: Top-level packages whose frames a warning skips to reach the application's line.
_INTERNAL = frozenset({"heaprank", "langchain_heaprank", "llama_index", "langchain_core",
                       "langchain_classic", "pydantic", "pydantic_core"})


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` pointing at the first frame outside heaprank, the frameworks and
    pydantic: the application's line that built or called the component."""
    level = 2
    frame: FrameType | None = sys._getframe(1)  # the caller's frame
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _INTERNAL:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def call_namespace(given: Any, default: str) -> str:
    """The namespace of one call: ``given`` (a keyword of the call) if not ``None``, checked as
    the core checks it, else ``default``.

    Raises:
        InputTypeError: not a string. InputError: empty, ``"*"``, too long, ...
    """
    return default if given is None else check_namespace(given)


def shows_citable_ids(text: str, shown: Sequence[Shown], query: str = "") -> bool:
    """Whether ``text``, what the model was shown, lets it cite a shown document the way
    :func:`~heaprank.learning.attribution.cited` reads one: one of its ids or aliases as a word
    of its own (``[lisbon-booked]``, ``id: 7f3a...``), or numbered sources, every position from
    ``[1]`` (or ``Source 1``) to the last. Ids are looked for with the documents' texts and the
    ``query`` taken out: an id that is a word of them ("dentist") shows no id."""
    if not text or not shown:
        return False
    if all(re.search(rf"\[{n}\]|\bSource {n}\b", text) for n in range(1, len(shown) + 1)):
        return True
    for part in (*(item.text for item in shown), query):
        if part:
            text = text.replace(part, " ")
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
               for item in shown for name in (item.id, *item.aliases) if name)


def nothing_to_cite(usage: str, used: Sequence[str], text: str, shown: Sequence[Shown],
                    query: str = "") -> bool:
    """An answer to skip: ``usage="citations"`` found no citation, and ``text`` showed the model
    no id it could have cited (:func:`shows_citable_ids`), so "it cited nothing" says nothing
    about what it used."""
    return usage == "citations" and not used and not shows_citable_ids(text, shown, query)


def distribution_version(name: str) -> str:
    """The installed version of distribution ``name`` (``"0.0.0"`` from a source tree that was
    never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "0.0.0"


def relative_scores(scores: Sequence[float]) -> list[float]:
    """``score / best score`` in [0, 1], best first: 1.0 for heaprank's first, 0.5 for a
    document it scores half as high. Relative to this call's candidates, like heaprank's own
    relevance, so a cutoff keeps what is close to the best, not what is relevant in itself."""
    best = max(scores, default=0.0)
    out, floor = [], 1.0
    for score in scores:
        value = min(max(score / best, 0.0), 1.0) if best > 0.0 else 0.0
        floor = min(floor, value)  # non-increasing with rank, whatever rounding did
        out.append(floor)
    return out


def reject_renamed(owner: str, given: Mapping[str, Any], hints: Mapping[str, str]) -> None:
    """Raise ``TypeError`` for a keyword of ``hints`` (a name other packages or older versions
    use), saying what to pass instead."""
    for name, hint in hints.items():
        if name in given:
            raise TypeError(f"{owner}: unknown keyword {name!r}; {hint}")


@dataclass(frozen=True, slots=True)
class _Call:
    """One feedback a :class:`FeedbackWriter` writes."""

    recall_id: str
    used: list[str]
    namespace: str | None
    now: Any
    done: Callable[[FeedbackOutcome], object]


class FeedbackWriter:
    """Writes feedback for a handler: never lost without a WARNING and a count.

    From sync code it calls ``feedback``; from a thread running an event loop it runs
    ``afeedback`` in a task (the loop is not blocked) and :meth:`aflush` waits for those. A task
    cancelled by a closing loop is written synchronously instead (feedback is idempotent).
    """

    def __init__(self, engine: Reranker, logger: logging.Logger) -> None:
        self.engine = engine
        self.logger = logger
        self.failed = 0
        self.skipped = 0
        self.abstained = 0
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[FeedbackOutcome]] = set()
        self._loops = LoopClients(engine)

    def write(self, recall_id: str, used: Iterable[str], *, namespace: str | None = None,
              now: Any = None, done: Callable[[FeedbackOutcome], object]) -> None:
        """Apply ``used`` to ``recall_id``; ``done(outcome)`` once it is recorded.

        ``namespace`` is the one the ranking was made in (the core then refuses a recall of
        another, and its outcome names every shown id, not only ``used``)."""
        call = _Call(recall_id, list(used), namespace, now, done)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_now(call)
            return
        task = loop.create_task(self._afeedback(call))
        with self._lock:
            self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(t, call))

    async def _afeedback(self, call: _Call) -> FeedbackOutcome:
        await self._loops.enter()
        return await self.engine.afeedback(call.recall_id, used=call.used, namespace=call.namespace,
                                           now=call.now)

    def _write_now(self, call: _Call) -> None:
        try:
            outcome = self.engine.feedback(call.recall_id, used=call.used,
                                           namespace=call.namespace, now=call.now)
        except Exception as exc:  # any reason: the app must hear of it, its request goes on
            self.fail(call.recall_id, exc)
            return
        call.done(outcome)

    def _finished(self, task: asyncio.Task[FeedbackOutcome], call: _Call) -> None:
        with self._lock:
            self._tasks.discard(task)
        if task.cancelled():
            self._write_now(call)
        elif task.exception() is not None:
            self.fail(call.recall_id, task.exception())  # type: ignore[arg-type]
        else:
            call.done(task.result())

    def fail(self, recall_id: str, exc: BaseException) -> None:
        """Count and log a feedback that could not be recorded."""
        with self._lock:
            self.failed += 1
            self.last_error = exc
        reason = str(exc) if isinstance(exc, HeapRankError) else f"{type(exc).__name__}: {exc}"
        self.logger.warning("heaprank: feedback for recall %s not recorded: %s", recall_id, reason)

    def skip(self, recall_id: str, fix: str) -> None:
        """Count an answer left unrecorded by :func:`nothing_to_cite`; the first one of this
        writer is logged at WARNING with ``fix`` (what makes the prompt show ids), the rest at
        DEBUG."""
        with self._lock:
            self.skipped += 1
            first = self.skipped == 1
        self.logger.log(logging.WARNING if first else logging.DEBUG,
                        "heaprank: answer of recall %s skipped, not recorded as feedback: the prompt "
                        "showed the model no id to cite, so citing nothing says nothing about what "
                        "it used (counted in handler.skipped; this warning is given once). %s",
                        recall_id, fix)

    def abstain(self, recall_id: str, usage: str) -> None:
        """Count an answer whose detector abstained (``None``: no citation, and no shown text
        covers enough of it): no feedback is recorded, since "it used nothing" would be a
        guess; logged at DEBUG."""
        with self._lock:
            self.abstained += 1
        self.logger.debug("heaprank: answer of recall %s not recorded as feedback: usage=%r "
                          "could not tell what it used (counted in handler.abstained)",
                          recall_id, usage)

    async def aflush(self) -> None:
        """Wait until every feedback written from this loop is recorded (or failed)."""
        while True:
            with self._lock:
                pending = [t for t in self._tasks if not t.done()]
            if not pending:
                return
            await asyncio.wait(pending)


class LoopClients:
    """Releases ``engine``'s async client of each event loop it served when that loop shuts
    down its async generators (``asyncio.run`` does as it ends): a Redis state keeps one async
    client per loop, and a loop that ends with it open leaves unclosed connections behind.

    Await :meth:`enter` before each async call of the engine; a state without async clients
    (memory, SQLite) needs nothing.
    """

    def __init__(self, engine: Reranker) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._guards: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = \
            weakref.WeakKeyDictionary()

    async def enter(self) -> None:
        release = getattr(self._engine.state, "aclose_loop", None)
        if release is None:
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            if loop in self._guards:
                return
            guard = self._guards[loop] = self._guard(loop, release)
        await guard.__anext__()  # parked: the loop finalises it at shutdown

    async def _guard(self, loop: asyncio.AbstractEventLoop,
                     release: Callable[[], Any]) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                self._guards.pop(loop, None)
            await release()
