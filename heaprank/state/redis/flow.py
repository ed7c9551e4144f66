"""The Redis backend's operations written once for its sync and async clients.

A *flow* is a generator that yields requests (what it needs from a backend: a state call, a
Redis command) and receives each reply, or has the request's error thrown in where it yielded.
:func:`drive` fulfils the requests with a plain function, :func:`adrive` with a coroutine
function: the same flow then runs in a thread or on an event loop, and the logic between the
requests (validation, scoring, retries of a lost reply) exists once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

R = TypeVar("R")
T = TypeVar("T")
Flow = Generator[R, Any, T]


_NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


class Call(NamedTuple):
    """A request to call a method by name on whatever the driver answers requests with.
    (A named tuple: a rerank makes two, and a frozen dataclass costs three times as much.)"""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = _NO_KWARGS

    def send(self, target: Any) -> Any:
        """The call on ``target``: its result, or an awaitable of it from an async target."""
        return getattr(target, self.name)(*self.args, **self.kwargs)


def _advance(flow: Flow[R, T], reply: Any, error: Exception | None) -> tuple[bool, Any]:
    """Send ``reply`` (or throw ``error``) into ``flow``: ``(True, result)`` once it returns,
    else ``(False, its next request)``."""
    try:
        return False, (flow.send(reply) if error is None else flow.throw(error))
    except StopIteration as stop:
        return True, stop.value


def drive(flow: Flow[R, T], fulfil: Callable[[R], Any]) -> T:
    """Run ``flow`` to its result, answering each request with ``fulfil(request)``."""
    done, value = _advance(flow, None, None)
    while not done:
        try:
            reply, error = fulfil(value), None
        except Exception as exc:  # the flow decides: handle it where it asked, or let it rise
            reply, error = None, exc
        done, value = _advance(flow, reply, error)
    result: T = value
    return result


async def adrive(flow: Flow[R, T], fulfil: Callable[[R], Awaitable[Any]]) -> T:
    """:func:`drive` on an event loop: each request is answered by ``await fulfil(request)``."""
    done, value = _advance(flow, None, None)
    while not done:
        try:
            reply, error = await fulfil(value), None
        except Exception as exc:
            reply, error = None, exc
        done, value = _advance(flow, reply, error)
    result: T = value
    return result
