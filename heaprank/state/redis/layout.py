"""Where the Redis backend keeps what: key names, hash tags and Cluster slots, packed counts, and
the options a Redis URL may carry. Shared by the sync and the async client; no I/O here.

Key layout 2 (``P`` the prefix; ``t`` a namespace's bucket tag: bucket ``crc32(ns) mod 16384``
as a short string in Cluster slot number ``bucket``, so odd characters of a name never reach
a tag; ``g`` the tag of pooled shard ``s = crc32(feature) mod G``; ``b`` the tag
of bucket-registry shard ``bucket mod 16``)::

    P:{t}:l:<ns>          string  a namespace's links by feature id (blob.py: pos, neg)
    P:{t}:e:<ns>          hash  doc:<id> feature -> <dd> pos, neg (a namespace's own features)
    P:{t}:d:<ns>          hash  doc id -> <dd> last used, uses    (used documents only;
                                "" -> the namespace's feedbacks, counted in c)
    P:{t}:x:<ns>          hash  explicit feedback id -> recall id (expires with its newest)
    P:{t}:h:<slot>        hash  the bucket's impressions without feedback whose recall was
                                made in 10-minute slot <slot> (epoch ms // 600,000): recall id
                                -> the codec's compact format 3, the namespace, u16 its length;
                                the hash expires impression_ttl after the slot ends, each
                                field is read as expired impression_ttl after its recall
    P:{t}:k:<hour>        hash  the same by hour (epoch ms // 3,600,000), for impressions that
                                received feedback (no TTL; the cap drops the oldest hours, or
                                the oldest fields of one)
    P:{t}:ho              zset  slots with an open hash, by the hash's expiry (ms)
    P:{t}:hf              zset  hours with a fed hash, by hour
    P:{t}:i:<ns>:<rid>    string  an impression of a 16-digit recall id (the form of layout 2's
                                first release, format 1 or 2; TTL until its first feedback)
    P:{t}:a:<ns>          hash  doc id -> its co-use edges ("" -> their count; edges.py)
    P:{t}:n               hash  the bucket's namespaces with evidence (the registry) -> "";
                                "" -> feedbacks applied in the bucket
    P:{t}:o               zset  the bucket's impressions without feedback, by expiry (ms)
    P:{t}:f               zset  the bucket's impressions that received feedback, by age
    P:{t}:q               hash  outbox (Cluster): entry id -> pooled deltas not yet pushed
    P:{b}:b               set   bucket numbers in use (a superset: written before the data)
    P:{g}:g               hash  feature -> <dddd> pos, neg, namespaces holding it, its id;
                                "" -> the shard's version, bumped by every write
    P:{ids}:f             hash  feature -> its id ("" -> the last id given)
    P:{ids}:r             hash  id -> feature (both dropped when no namespace holds it)
    P:{g}:m               zset  outbox entries applied to the shard, by creation time
                                (dedupe); "" -> the watermark (pooled.py)
    P:r:{<rid>}           string  "<t>:<ns>": which namespace holds a 16-digit recall id (TTL as
                                its body)
    P:meta                string  "2:<G>" (layout 2 with G pooled shards); after a reshard
                                "2:<G>@<e>" (epoch e: the shards' tags carry it), during one
                                "2:<G>@<e>><N>:<k>" (old shards below k moved to the N of
                                epoch e + 1; ``reshard.py``); a bare number is layout 1, which
                                ``heaprank state migrate`` converts

Recall ids minted here are 20 hex digits: the 16 of :func:`~heaprank.records.new_recall_id`
(time and randomness), then the bucket's 4, so an impression is found from its id alone (its
bucket, and its slot and hour from the id's time) without a pointer key; its field value names the
namespace, and a recall id used with another namespace is unknown. Impressions of 16-digit ids
(written before, or copied from SQLite or memory) keep the key-and-pointer form.

A namespace's keys share one slot (its bucket's), so a feedback is one script in a Cluster too;
10,000 namespaces land on ~7,500 distinct slots. The pooled layer is placed by feature, not by
namespace: its G shards' tags are spread evenly over the slot range.
"""

from __future__ import annotations

import binascii
import functools
import itertools
import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ...errors import ConfigError
from ...records import new_recall_id, recall_born_ms

SLOTS = 16_384
#: Namespace buckets: one per Cluster slot's worth of hash values.
BUCKETS = 16_384
#: Shards of the registry of buckets in use.
BUCKET_SHARDS = 16
LAYOUT_VERSION = 2
_GLOB = re.compile(r"([*?\[\]\\])")
#: Length of a recall id of layout 2's first impressions (the last part of their keys).
RECALL_ID_CHARS = 16
#: Length of a recall id minted by this backend: 16 hex digits, then 4 of the namespace's bucket.
BUCKETED_ID_CHARS = RECALL_ID_CHARS + 4
#: Impressions with feedback are grouped in hashes by the hour their recall was made in (epoch
#: ms // HOUR_MS); those without, by its 10-minute slot (a slot's hash expires the TTL after
#: the slot ends: what an expired impression costs until then is bounded by its length).
HOUR_MS = 3_600_000
SLOT_MS = 600_000
_NS_LENGTH = struct.Struct("<H")

#: Options a URL may carry in its query string, with their types.
URL_OPTIONS = {"prefix": str, "global_shards": int, "timeout": float, "global_cache_ttl": float,
               "max_impressions": int, "impression_ttl": float, "mode": str, "replica_url": str,
               "read_from_replicas": int, "eviction": str, "max_connections": int,
               "pool_timeout": float}
_URL_OPTION_ARGS = {"timeout": "timeout_s", "global_cache_ttl": "global_cache_ttl_s",
                    "impression_ttl": "impression_ttl_s", "pool_timeout": "pool_timeout_s"}
CLUSTER_SCHEME = "redis+cluster://"


def key_slot(key: str) -> int:
    """The Redis Cluster slot of a key (CRC16-XMODEM of its hash tag, mod 16384)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key.encode("utf-8"), 0) % SLOTS


def shard_tags(n: int, kind: str = "g") -> list[str]:
    """One hash tag per shard, each in its own 1/n of the slot range, so shards spread evenly
    over a Cluster's masters (which own contiguous slot ranges)."""
    tags = []
    for s in range(n):
        low, high = s * SLOTS // n, (s + 1) * SLOTS // n
        k = 0
        while not low <= key_slot(f"{{{kind}{s}.{k}}}") < high:
            k += 1
        tags.append(f"{kind}{s}.{k}")
    return tags


_TAG_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"


@functools.cache
def slot_tags() -> tuple[str, ...]:
    """For each Cluster slot, the first string of 1 to 3 of :data:`_TAG_CHARS` that hashes to
    it (every slot has one; ~0.1 s, once per process)."""
    tags: list[str | None] = [None] * SLOTS
    for n in (1, 2, 3):
        for combo in itertools.product(_TAG_CHARS, repeat=n):
            text = "".join(combo)
            slot = binascii.crc_hqx(text.encode("ascii"), 0) % SLOTS
            if tags[slot] is None:
                tags[slot] = text
    assert all(tags)
    return tuple(t for t in tags if t)


def unpack(values: Iterable[bytes | None], width: int) -> np.ndarray:
    """Packed doubles (missing values as zeros) as a (len, width) float64 array."""
    zero = bytes(8 * width)
    raw = b"".join(v or zero for v in values)
    return np.frombuffer(raw, dtype="<f8").reshape(-1, width).astype(np.float64)


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN pattern."""
    return _GLOB.sub(r"\\\1", text)


def crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def _check_shards(n_shards: int) -> None:
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or not 1 <= n_shards <= 1024:
        raise ValueError("global_shards: must be an int in [1, 1024]")


@functools.cache
def epoch_tags(n: int, epoch: int) -> tuple[str, ...]:
    """The tags of the G = ``n`` pooled shards of reshard epoch ``epoch`` (0: as ever)."""
    return tuple(shard_tags(n, "g" if epoch == 0 else f"g{epoch}e"))


@dataclass(frozen=True)
class Placement:
    """Where the pooled layer is, as ``P:meta`` says: G shards of epoch ``epoch``, and during a
    reshard the ``target`` shard count of epoch + 1 with the old shards below ``moved`` moved."""

    shards: int
    epoch: int = 0
    target: int | None = None
    moved: int = 0

    @classmethod
    def parse(cls, text: str) -> Placement:
        """Placement of a layout-2 meta value (``2:G``, ``2:G@e``, ``2:G@e>N:k``)."""
        match = _META.fullmatch(text)
        if match is None:
            raise ValueError(f"not a layout-2 meta value: {text!r}")
        g, e, n, k = match.groups()
        placement = cls(int(g), int(e or 0), None if n is None else int(n), int(k or 0))
        if placement.text() != text:  # (one spelling each: a process compares the texts)
            raise ValueError(f"not a layout-2 meta value: {text!r}")
        return placement

    def order(self) -> list[int]:
        """The old shards in the order a reshard moves them: by new shard when several merge
        into one (G a multiple of N: the old shards of one new shard one after the other)."""
        n = self.target or self.shards
        if n < self.shards and self.shards % n == 0:
            return sorted(range(self.shards), key=lambda s: (s % n, s))
        return list(range(self.shards))

    def text(self) -> str:
        head = f"{LAYOUT_VERSION}:{self.shards}"
        if self.epoch == 0 and self.target is None:
            return head  # (as states before resharding wrote it)
        head += f"@{self.epoch}"
        return head if self.target is None else f"{head}>{self.target}:{self.moved}"


_META = re.compile(r"2:([0-9]+)(?:@([0-9]+)(?:>([0-9]+):([0-9]+))?)?")


class KeyLayout:
    """The key names of one state: its prefix, its namespaces' buckets and its G pooled shards
    (during a reshard: the old shards, then the new ones; :meth:`shard_of` says where a
    feature's row is, an index into :attr:`pooled`)."""

    def __init__(self, prefix: str, n_shards: int, placement: Placement | None = None) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("prefix: must be non-empty, without { or }")
        placement = placement or Placement(n_shards)
        _check_shards(placement.shards)
        self.prefix = prefix
        self.placement = placement
        self.n_shards = placement.shards
        self.tags = list(epoch_tags(self.n_shards, placement.epoch))
        self.target = placement.target
        #: Each old shard's rank in the moves (moved once below ``placement.moved``).
        self.rank = {s: r for r, s in enumerate(placement.order())}
        if self.target is not None:
            _check_shards(self.target)
            self.tags += epoch_tags(self.target, placement.epoch + 1)
        self.pooled = [f"{prefix}:{{{t}}}:g" for t in self.tags]
        self.markers = [f"{prefix}:{{{t}}}:m" for t in self.tags]
        self.registry = [f"{prefix}:{{{t}}}:b" for t in shard_tags(BUCKET_SHARDS, "b")]
        self.id_map = f"{prefix}:{{ids}}:f"
        self.id_names = f"{prefix}:{{ids}}:r"
        self.meta = f"{prefix}:meta"
        self.meta_value = placement.text()

    @staticmethod
    def bucket(namespace: str) -> int:
        return crc(namespace) % BUCKETS

    @staticmethod
    def bucket_tag(bucket: int) -> str:
        """Bucket ``b``'s hash tag: a short string in Cluster slot ``b``."""
        return slot_tags()[bucket]

    def tag(self, namespace: str) -> str:
        """The hash tag of a namespace's keys: its bucket, derived from the name alone."""
        return self.bucket_tag(self.bucket(namespace))

    def shard_of(self, feature: str) -> int:
        """The pooled shard (an index into :attr:`pooled`) a feature's pooled counts live in:
        during a reshard, its new shard (past the old ones) once its old shard moved."""
        h = crc(feature)
        old = h % self.n_shards
        if self.target is None or self.rank[old] >= self.placement.moved:
            return old
        return self.n_shards + h % self.target

    def registry_key(self, bucket: int) -> str:
        return self.registry[bucket % BUCKET_SHARDS]

    def key(self, tag: str, kind: str, namespace: str | None = None) -> str:
        base = f"{self.prefix}:{{{tag}}}:{kind}"
        return base if namespace is None else f"{base}:{namespace}"

    def ns_key(self, kind: str, namespace: str) -> str:
        """A namespace's own key of ``kind`` (``l`` links, ``d`` documents, ``x`` explicit ids)."""
        return self.key(self.tag(namespace), kind, namespace)

    def bucket_key(self, namespace: str, kind: str) -> str:
        """The key of ``kind`` (``n``, ``o``, ``f``, ``c``, ``q``) of a namespace's bucket."""
        return self.key(self.tag(namespace), kind)

    def mint(self, namespace: str) -> str:
        """A fresh recall id for an impression of ``namespace``: its bucket in 4 more digits."""
        return f"{new_recall_id()}{self.bucket(namespace):04x}"

    @staticmethod
    def id_bucket(recall_id: str) -> int | None:
        """The bucket a minted recall id names (None: an id of 16 digits, held by a pointer)."""
        if len(recall_id) != BUCKETED_ID_CHARS:
            return None
        return int(recall_id[RECALL_ID_CHARS:], 16)

    @staticmethod
    def hour(recall_id: str, period_ms: int = HOUR_MS) -> int:
        """The hour (epoch ms // HOUR_MS; ``period_ms=SLOT_MS``: the 10-minute slot) a recall id
        was made in: its impression's fed (open) hash."""
        return recall_born_ms(recall_id) // period_ms

    def hour_key(self, tag: str, kind: str, hour: int | bytes) -> str:
        """A bucket's hash of impressions: ``h`` without feedback (``hour`` a 10-minute slot),
        ``k`` with feedback (an hour)."""
        text = hour.decode() if isinstance(hour, bytes) else str(hour)
        return f"{self.prefix}:{{{tag}}}:{kind}:{text}"

    def impression_keys(self, recall_id: str) -> tuple[str, str]:
        """The open and the fed hash a minted recall id's impression is a field of."""
        tag = self.bucket_tag(int(recall_id[RECALL_ID_CHARS:], 16))
        return (self.hour_key(tag, "h", self.hour(recall_id, SLOT_MS)),
                self.hour_key(tag, "k", self.hour(recall_id)))

    @staticmethod
    def stored(body: bytes, namespace: str) -> bytes:
        """An impression's field value: its codec body, its namespace, the namespace's length."""
        name = namespace.encode("utf-8")
        return body + name + _NS_LENGTH.pack(len(name))

    @staticmethod
    def split_stored(value: bytes) -> tuple[str, bytes]:
        """``(namespace, codec body)`` of a field value (:meth:`stored`)."""
        n = _NS_LENGTH.unpack_from(value, len(value) - 2)[0]
        return value[-2 - n:-2].decode("utf-8"), value[:-2 - n]

    def body_key(self, namespace: str, recall_id: str) -> str:
        return f"{self.ns_key('i', namespace)}:{recall_id}"

    def pointer_key(self, recall_id: str) -> str:
        return f"{self.prefix}:r:{{{recall_id}}}"

    def pointer_value(self, namespace: str) -> str:
        return f"{self.tag(namespace)}:{namespace}"

    def every_key(self) -> str:
        """A SCAN pattern of every key of this state."""
        return glob_escape(self.prefix) + ":*"

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
        if name == "read_from_replicas":
            parsed = bool(parsed)
        ours[_URL_OPTION_ARGS.get(name, name)] = parsed
    return urlunsplit(parts._replace(query=urlencode(kept))), ours
