"""``heaprank state migrate URL``: convert a state of Redis layout 1 (every namespace's keys in
the slot of one of N global shards, the pool summed over those shards) into layout 2
(:mod:`.layout`), while writers of this version run.

1. The meta key says layout 2 at once (``P:migrating`` keeps N), so writers can open the state;
   what they write goes to the new keys.
2. Old impressions are copied to their namespace's bucket (body, TTL, open or fed zset), and
   their recall-id pointers rewritten: a feedback on an old recall works from then on.
3. The old pooled counts are pushed to the new shards, one outbox entry per old shard (applied
   at most once, so a migration run again after a crash counts nothing twice).
4. Each namespace is merged into its new keys by one script in its slot (``MIGRATE_NS`` in
   :mod:`.lua_migrate`): its links and documents are added to what writers wrote meanwhile, its
   feedback count to its bucket's, and the namespace is marked migrated in the same step (a
   second run skips it); then its old keys are deleted.

A state already of layout 2 has its namespaces' links strings still in format 1 (float32
counts, :mod:`.blob`) rewritten in format 2, one script per string (``WIDEN_LINKS``; a
writer's feedback rewrites a string too, so the two never conflict).

On a Cluster (a ``redis+cluster://`` URL) the scans visit every master, and every script
touches keys of one slot: ``MIGRATE_NS`` a namespace's new keys (one tag), ``INTERN`` the id
map's. Until a namespace is merged, a rerank does not see its old evidence (the old keys are not read).
Writers of the previous version must be stopped first: what they write to the old keys after
their namespace was merged is not copied.
"""

from __future__ import annotations

import time
from typing import Any

from ...errors import ConfigError
from ...records import recall_key
from .. import codec
from .layout import KeyLayout, glob_escape, shard_tags
from .pooled import Entry, encode_entry, push
from .wire import Script


def _digest(namespace: str) -> str:
    """A namespace's stand-in in marker ids (which outlive it: no name there)."""
    import hashlib

    return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:24]


def _flat(rows: dict[bytes, bytes]) -> list[bytes]:
    return [x for k, v in sorted(rows.items()) for x in (k, v)]


class Migration:
    """One run of the migration on ``client`` (sync), for ``layout`` (the new layout)."""

    def __init__(self, client: Any, layout: KeyLayout) -> None:
        self.client = client
        self.layout = layout
        self.prefix = layout.prefix
        self.counts = {"namespaces": 0, "impressions": 0, "pooled_features": 0, "skipped": 0,
                       "links_rewritten": 0}
        self.marked: set[str] = set()  # the buckets' marker hashes (namespace names: deleted)

    def send(self, request: Any) -> Any:
        try:
            return request.send(self.client)
        except Exception as exc:
            if "NOSCRIPT" not in str(exc):
                raise
            request.load(self.client)
            return request.send(self.client)

    def run_flow(self, flow: Any) -> Any:
        from .flow import drive
        return drive(flow, self.send)

    def push(self, entries: list[Entry]) -> None:
        self.run_flow(push(self.layout, entries))

    def start(self) -> int | None:
        """Flip the meta key to layout 2; the old N (None: nothing to migrate)."""
        meta, marker = self.layout.meta, f"{self.prefix}:migrating"
        stored = self.client.get(meta)
        if stored is not None and b":" not in stored:
            self.client.set(marker, stored)
            self.client.set(meta, self.layout.meta_value)
        elif stored is not None and stored.decode() != self.layout.meta_value:
            raise ConfigError(f"state migrate: prefix {self.prefix!r} holds layout "
                              f"{stored.decode()!r}, not layout 2 with global_shards="
                              f"{self.layout.n_shards}")
        old = self.client.get(marker)
        return None if old is None else int(old)

    def old_key(self, tag: str, kind: str, namespace: str | None = None) -> str:
        base = f"{self.prefix}:{{{tag}}}:{kind}"
        return base if namespace is None else f"{base}:{namespace}"

    def impressions(self, tags: list[str]) -> None:
        """Copy every old impression to its bucket and rewrite its pointer."""
        for tag in tags:
            head = self.old_key(tag, "i")
            pattern = glob_escape(head + ":") + "*"
            for key in self.client.scan_iter(match=pattern, count=1000):
                name = key.decode("utf-8")[len(head) + 1:]
                ns, rid = name[:-17], name[-16:]
                if recall_key(rid) is None:
                    continue
                body, ttl = self.client.get(key), self.client.pttl(key)
                if body is not None:
                    self._copy_impression(ns, rid, body, ttl)
                self.client.delete(key)

    def _copy_impression(self, ns: str, rid: str, body: bytes, ttl: int) -> None:
        layout = self.layout
        new = layout.body_key(ns, rid)
        fed = any(codec.verdicts_of(body))
        px = None if fed or ttl < 0 else max(ttl, 1)
        bucket = layout.bucket(ns)
        self.client.sadd(layout.registry_key(bucket), bucket)
        self.client.set(new, body, px=px, nx=True)
        if fed:
            self.client.zadd(layout.bucket_key(ns, "f"), {new: int(int(rid, 16) >> 20)})
        else:
            self.client.zadd(layout.bucket_key(ns, "o"), {new: int(time.time() * 1000) + (px or 0)})
        self.client.set(layout.pointer_key(rid), layout.pointer_value(ns), px=px)
        self.counts["impressions"] += 1

    def intern(self, names: list[bytes]) -> dict[bytes, int]:
        """The ids of pooled features (made now for those without one)."""
        shared = [f for f in names if not f.startswith(b"doc:")]
        if not shared:
            return {}
        made = self.send(Script("INTERN", [self.layout.id_map, self.layout.id_names], shared))
        return {f: int(i) for f, i in zip(shared, made)}

    def pooled(self, tags: list[str]) -> None:
        """Push each old shard's pooled counts as one outbox entry (applied once)."""
        import struct

        for s, tag in enumerate(tags):
            rows = self.client.hgetall(self.old_key(tag, "g"))
            rows = {f: v for f, v in rows.items() if struct.unpack("<ddd", v)[2] > 0}
            ids = self.intern(sorted(rows))
            entry_rows = [(f.decode("utf-8"), ids[f], *struct.unpack("<ddd", v))
                          for f, v in sorted(rows.items()) if f in ids]
            if entry_rows:
                self.counts["pooled_features"] += len(entry_rows)
                entry = Entry(self.old_key(tag, "q"), f"migrate:{s}", encode_entry(entry_rows))
                self.push([entry])

    def namespaces(self, tags: list[str]) -> None:
        """Merge each old namespace into its new keys, then delete its old keys."""
        for tag in tags:
            names = sorted(n.decode("utf-8") for n in self.client.smembers(self.old_key(tag, "n")))
            names += self._without_evidence(tag, set(names))
            for ns in names:
                self._namespace(tag, ns)

    def _without_evidence(self, tag: str, known: set[str]) -> list[str]:
        """Namespaces with old keys but no evidence (documents or edges alone)."""
        found = set()
        for kind in ("d", "a", "x"):
            head = self.old_key(tag, kind) + ":"
            for key in self.client.scan_iter(match=glob_escape(head) + "*", count=1000):
                found.add(key.decode("utf-8")[len(head):])
        return sorted(found - known)

    def _namespace(self, tag: str, ns: str) -> None:
        layout = self.layout
        old = {k: self.old_key(tag, k, ns) for k in "ldxa"}
        links, docs = self.client.hgetall(old["l"]), self.client.hgetall(old["d"])
        ids, edges = self.client.hgetall(old["x"]), self.client.hgetall(old["a"])
        expire = self.client.pexpiretime(old["x"]) if ids else 0
        bucket = layout.bucket(ns)
        self.client.sadd(layout.registry_key(bucket), bucket)
        keys = [layout.ns_key("l", ns), layout.ns_key("d", ns), layout.bucket_key(ns, "n"),
                layout.bucket_key(ns, "n"), layout.bucket_key(ns, "M"), layout.ns_key("x", ns),
                layout.ns_key("a", ns), layout.ns_key("e", ns)]
        fids = self.intern(sorted(links))
        triples = [x for f, v in sorted(links.items()) for x in (f, fids.get(f, 0), v)]
        args = [ns, len(links), len(docs), len(ids), len(edges), *triples, *_flat(docs),
                *_flat(ids), *_flat(edges), max(int(expire or 0), 0)]
        self.marked.add(keys[4])
        held = self.send(Script("MIGRATE_NS", keys, args))
        if held == b"done":
            self.counts["skipped"] += 1
        else:
            self.counts["namespaces"] += 1
            pooled = [f for f in held if not f.startswith(b"doc:")]
            if pooled:  # counted once as a holder by a writer since, once by the old pool

                blob = encode_entry([(f.decode("utf-8"), fids[f], 0.0, 0.0, -1.0) for f in pooled])
                self.push([Entry(layout.bucket_key(ns, "q"), f"migrate:held:{_digest(ns)}", blob)])
        self.client.delete(*old.values())

    def widen_links(self) -> None:
        """Rewrite every namespace's links string still in format 1 (float32) in format 2."""
        from .admin import namespaces_flow

        for ns in self.run_flow(namespaces_flow(self.layout)):
            key = self.layout.ns_key("l", ns)
            self.counts["links_rewritten"] += int(self.send(Script("WIDEN_LINKS", [key], [])))

    def finish(self, tags: list[str]) -> None:
        """Delete the old shard keys and the migration marker."""
        for tag in tags:
            self.client.delete(*(self.old_key(tag, k) for k in "gnfc"))
        for key in sorted(self.marked):
            self.client.delete(key)
        self.client.delete(f"{self.prefix}:migrating")


def migrate(client: Any, layout: KeyLayout) -> dict[str, int]:
    """Convert the layout-1 state under ``layout.prefix`` (see the module docstring), then
    rewrite the links strings of format 1; what was done, as counts."""
    run = Migration(client, layout)
    old = run.start()
    if old is not None:
        tags = shard_tags(old, "")
        run.impressions(tags)
        run.pooled(tags)
        run.namespaces(tags)
        run.finish(tags)
    run.widen_links()
    return run.counts


def migrate_url(url: str) -> dict[str, int]:
    """:func:`migrate` the state a Redis URL names (its ``prefix=`` and ``global_shards=``)."""
    from .connect import Settings, connect
    from .layout import redis_options

    if not url.startswith(("redis://", "rediss://", "unix://", "redis+cluster://")):
        raise ConfigError("state migrate: converts a Redis state (redis://, rediss://, unix://, "
                         "redis+cluster://)")
    base, options = redis_options(url)
    settings = Settings.of("state migrate", options)  # type: ignore[arg-type]
    client = connect(base, settings.timeout_s)
    try:
        return migrate(client, KeyLayout(settings.prefix, settings.global_shards))
    finally:
        client.close()
