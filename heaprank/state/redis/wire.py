"""The requests the Redis backend's flows yield (:mod:`heaprank._flow`): one command, a
pipeline, a script by its SHA1; and every script the backend runs."""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from . import lua as redis_lua
from . import lua_impressions, lua_migrate, lua_pooled
from .flow import Call

#: Every script the backend runs, by name, with the SHA1 that EVALSHA names it by
#: (READ_WITH_EDGES wraps READ_LOCAL: see :mod:`.lua`).
SCRIPTS = {**{name: getattr(redis_lua, name) for name in
              ("READ_LOCAL", "FEEDBACK", "FORGET", "POOL_ADD", "INTERN", "MARKS_TRIM")},
           **{name: getattr(lua_impressions, name) for name in
              ("PUT", "PUT_HOURLY", "GET_LOCAL", "DROP_FED", "TRIM_FED")},
           "MIGRATE_NS": lua_migrate.MIGRATE_NS, "WIDEN_LINKS": lua_migrate.WIDEN_LINKS,
           **{name: getattr(lua_pooled, name) for name in
              ("POOL_PUSH_LOCAL", "META_SWAP", "RESHARD_MOVE", "RESHARD_FREEZE", "RESHARD_PUT",
               "RESHARD_TOMB")},
           "READ_WITH_EDGES": redis_lua.READ_WITH_EDGES}
SHAS = {name: hashlib.sha1(body.encode("utf-8")).hexdigest() for name, body in SCRIPTS.items()}


#: One command in its own round trip: a call of the client's method of that name.
Command = Call


@dataclass(frozen=True, slots=True)
class Script:
    """One of :data:`SCRIPTS` run by its SHA1 on the node of its keys' slot."""

    name: str
    keys: Sequence[str | bytes]
    args: Sequence[Any]

    def send(self, client: Any) -> Any:
        return client.evalsha(SHAS[self.name], len(self.keys), *self.keys, *self.args)

    def load(self, client: Any) -> Any:
        """Load the script (a server that restarted since answers NOSCRIPT)."""
        return client.script_load(SCRIPTS[self.name])


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Commands sent together, without a transaction: one round trip (per node in a Cluster)."""

    commands: tuple[Command | Script, ...]

    def send(self, client: Any) -> Any:
        pipe = client.pipeline(transaction=False)
        for command in self.commands:
            command.send(pipe)
        return pipe.execute()

    def load(self, client: Any) -> Any:
        """Load the scripts among the commands (after NOSCRIPT)."""
        return [client.script_load(SCRIPTS[c.name]) for c in self.commands if isinstance(c, Script)]


Request = Command | Pipeline | Script
Op = Generator[Request, Any, Any]


