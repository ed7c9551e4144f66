"""Where the Redis backend keeps what: key names, hash tags and Cluster slots, packed counts, and
the options a Redis URL may carry. Shared by the sync and the async client; no I/O here.

Key layout (``P`` the prefix, ``t`` the hash tag of global shard ``s = crc32(ns) mod N``)::

    P:{t}:l:<ns>          hash  feature -> <dd> pos, neg          (a namespace's links)
    P:{t}:d:<ns>          hash  doc id -> <dd> last used, uses    (used documents only;
                                "" -> the namespace's feedbacks, counted in c)
    P:{t}:x:<ns>          hash  explicit feedback id -> recall id (expires with its newest)
    P:{t}:i:<ns>:<rid>    string  the codec bytes of an impression (TTL until its first feedback)
    P:{t}:a:<ns>          hash  doc id -> its co-use edges ("" -> their count; redis_assoc.py)
    P:{t}:g               hash  feature -> <ddd> pos, neg, namespaces holding it   (global shard s)
    P:{t}:n               set   the namespaces of shard s with evidence
    P:{t}:f               zset  impressions of shard s that received feedback, by age
    P:{t}:c               string  feedbacks applied in shard s
    P:r:{<rid>}           string  "<t>:<ns>": which namespace holds a recall id (TTL as its body)
    P:meta                string  N, so processes with another N are refused

A namespace's keys and its global shard share one slot, so a feedback is one Lua script in a
Cluster too; the global layer is the sum of the N shards, whose tags are spread over the slot
range (so over a Cluster's masters).
"""

from __future__ import annotations

import binascii
import re
import zlib
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ...errors import ConfigError

SLOTS = 16_384
_GLOB = re.compile(r"([*?\[\]\\])")
#: Length of a recall id, the last part of an impression's key.
RECALL_ID_CHARS = 16

#: Options a URL may carry in its query string, with their types.
URL_OPTIONS = {"prefix": str, "global_shards": int, "timeout": float, "global_cache_ttl": float,
               "max_impressions": int, "impression_ttl": float, "mode": str}
_URL_OPTION_ARGS = {"timeout": "timeout_s", "global_cache_ttl": "global_cache_ttl_s",
                    "impression_ttl": "impression_ttl_s"}
CLUSTER_SCHEME = "redis+cluster://"


def key_slot(key: str) -> int:
    """The Redis Cluster slot of a key (CRC16-XMODEM of its hash tag, mod 16384)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key.encode("utf-8"), 0) % SLOTS


def shard_tags(n: int) -> list[str]:
    """One hash tag per global shard, each in its own 1/n of the slot range, so shards spread
    evenly over a Cluster's masters (which own contiguous slot ranges)."""
    tags = []
    for s in range(n):
        low, high = s * SLOTS // n, (s + 1) * SLOTS // n
        k = 0
        while not low <= key_slot(f"{{{s}.{k}}}") < high:
            k += 1
        tags.append(f"{s}.{k}")
    return tags


def unpack(values: Iterable[bytes | None], width: int) -> np.ndarray:
    """Packed doubles (missing values as zeros) as a (len, width) float64 array."""
    zero = bytes(8 * width)
    raw = b"".join(v or zero for v in values)
    return np.frombuffer(raw, dtype="<f8").reshape(-1, width).astype(np.float64)


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN pattern."""
    return _GLOB.sub(r"\\\1", text)


class KeyLayout:
    """The key names of one state: its prefix and its N global shards' hash tags."""

    def __init__(self, prefix: str, n_shards: int) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("prefix: must be non-empty, without { or }")
        if isinstance(n_shards, bool) or not isinstance(n_shards, int) or not 1 <= n_shards <= 1024:
            raise ValueError("global_shards: must be an int in [1, 1024]")
        self.prefix = prefix
        self.n_shards = n_shards
        self.tags = shard_tags(n_shards)
        self.meta = f"{prefix}:meta"

    def tag(self, namespace: str) -> str:
        """The hash tag of the global shard a namespace writes to (and its keys carry)."""
        return self.tags[zlib.crc32(namespace.encode("utf-8")) % self.n_shards]

    def key(self, tag: str, kind: str, namespace: str | None = None) -> str:
        base = f"{self.prefix}:{{{tag}}}:{kind}"
        return base if namespace is None else f"{base}:{namespace}"

    def ns_key(self, kind: str, namespace: str) -> str:
        """A namespace's own key of ``kind`` (``l`` links, ``d`` documents, ``x`` explicit ids)."""
        return self.key(self.tag(namespace), kind, namespace)

    def body_key(self, namespace: str, recall_id: str) -> str:
        return f"{self.ns_key('i', namespace)}:{recall_id}"

    def pointer_key(self, recall_id: str) -> str:
        return f"{self.prefix}:r:{{{recall_id}}}"

    def shard_keys(self, kind: str) -> list[str]:
        """One key of ``kind`` per global shard (``g`` counts, ``n`` namespaces, ``f`` fed, ``c``)."""
        return [self.key(t, kind) for t in self.tags]

    def pointer_value(self, namespace: str) -> str:
        return f"{self.tag(namespace)}:{namespace}"

    def bodies_of(self, namespace: str) -> str:
        """A SCAN pattern of a namespace's impression keys."""
        return glob_escape(f"{self.ns_key('i', namespace)}:") + "?" * RECALL_ID_CHARS

    def every_key(self) -> str:
        """A SCAN pattern of every key of this state."""
        return glob_escape(self.prefix) + ":*"

    def every_body(self) -> str:
        """A SCAN pattern of every impression key of this state."""
        return glob_escape(self.prefix) + ":{*}:i:*"

    @staticmethod
    def split_body_key(key: bytes) -> tuple[str, str]:
        """``(namespace, recall id)`` of an impression key."""
        name = key.decode("utf-8")
        head = name.index("}:i:") + 4
        return name[head:-RECALL_ID_CHARS - 1], name[-RECALL_ID_CHARS:]


def redis_options(url: str) -> tuple[str, dict[str, Any]]:
    """Split a Redis URL into the URL redis-py reads and the options of the state classes."""
    parts = urlsplit(url)
    kept, ours = [], {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        kind = URL_OPTIONS.get(name)
        if kind is None:
            kept.append((name, value))
            continue
        try:
            parsed = kind(value)
        except ValueError:
            raise ConfigError(f"state: option {name}={value!r} is not a valid {kind.__name__}") from None
        if name == "mode":
            if parsed not in ("ro", "rw"):
                raise ConfigError(f"state: mode={value!r}; expected ro or rw")
            ours["read_only"] = parsed == "ro"
            continue
        ours[_URL_OPTION_ARGS.get(name, name)] = parsed
    return urlunsplit(parts._replace(query=urlencode(kept))), ours
