"""Row-level security per namespace in a PostgreSQL state, for a heaprank schema that several
applications reach, each as a database role of its own.

``heaprank state migrate URL?rls=on``, run by the schema's owner, turns it on: a ``grants``
table (role -> a namespace, or a namespace prefix), a ``granted(name)`` function, and, on every
table of one namespace's rows (``namespaces``, ``links``, ``docs``, ``impressions``,
``feedback_ids``, ``edges``), ``ENABLE`` and ``FORCE ROW LEVEL SECURITY`` with one policy:
a row is seen and written only by a role granted its namespace. The owner of the schema's
tables (and any member of that role; a superuser and a ``BYPASSRLS`` role skip policies) passes
every policy, so forget, copy, migrate and ``stats`` of the whole state work as before.

The pooled tables (``features``: shape counts every namespace adds to; ``meta``) stay without
policies: they are shared by design, and a feedback's transaction must update ``features``
whatever namespace it is for. ``heaprank state grant`` gives an application role the rights to
update it directly, in the same transaction as its own rows (no SECURITY DEFINER function to
audit; the pool is as writable to each application as without row-level security), and to read
``meta`` only (the shared fitted weights are the owner's to write).

A state whose schema has row-level security on checks, before each call on a namespace, that
its role is granted it (one statement more), so a call on another namespace is a
:class:`~heaprank.errors.StateError` naming the role and the namespace the caller asked for,
never an empty answer; the policies stop hand-written SQL on that role's connection too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ConfigError, StateError

#: The tables of one namespace's rows: each gets a policy (``namespaces`` by name, the others
#: by the namespace their ``ns`` column names).
TENANT_TABLES = ("namespaces", "links", "docs", "impressions", "feedback_ids", "edges")

_GRANTS = """
CREATE TABLE IF NOT EXISTS {s}.grants (
    role TEXT COLLATE "C" NOT NULL, namespace TEXT COLLATE "C" NOT NULL,
    prefix BOOLEAN NOT NULL, PRIMARY KEY (role, namespace, prefix))"""
#: A role sees its own grants only (the table's owner, not forced, sees them all).
_GRANTS_RLS = ("ALTER TABLE {s}.grants ENABLE ROW LEVEL SECURITY",
               "DROP POLICY IF EXISTS own_grants ON {s}.grants",
               "CREATE POLICY own_grants ON {s}.grants FOR SELECT USING (role = current_user)")
#: Whether the current role may see and write the rows of namespace ``ns``: the tables' owner
#: (or a member of it) or a role granted ``ns``. Written out in each policy (a function holding
#: a sub-SELECT is never inlined: called per row, it made a rerank three times slower).
_MAY = """(pg_catalog.pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c
             WHERE c.oid = '{s}.meta'::pg_catalog.regclass), 'MEMBER')
    OR EXISTS (SELECT 1 FROM {s}.grants g WHERE g.role = current_user AND CASE WHEN g.prefix
               THEN pg_catalog.starts_with({ns}, g.namespace) ELSE {ns} = g.namespace END))"""
#: The same as a function, for :func:`claim` (a role that bypasses row-level security too).
_GRANTED = """
CREATE OR REPLACE FUNCTION {s}.granted(ns TEXT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
SELECT {may} OR (SELECT r.rolbypassrls FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
$$"""
#: A row of another table is seen when its namespace's row is (under that row's policy).
_BY_ID = "EXISTS (SELECT 1 FROM {s}.namespaces n WHERE n.id = ns)"


def _policy_sql(schema: str) -> list[str]:
    """The statements that put row-level security on (again: each one can run twice)."""
    out = [_GRANTS.format(s=schema), *(q.format(s=schema) for q in _GRANTS_RLS),
           _GRANTED.format(s=schema, may=_MAY.format(s=schema, ns="ns"))]
    for table in TENANT_TABLES:
        test = (_MAY.format(s=schema, ns="name") if table == "namespaces"
                else _BY_ID.format(s=schema))
        out += [f"ALTER TABLE {schema}.{table} ENABLE ROW LEVEL SECURITY",
                f"ALTER TABLE {schema}.{table} FORCE ROW LEVEL SECURITY",
                f"DROP POLICY IF EXISTS tenant ON {schema}.{table}",
                f"CREATE POLICY tenant ON {schema}.{table} USING ({test}) WITH CHECK ({test})"]
    return out


def rls_option(url: str) -> tuple[str, bool | None]:
    """``url`` without its ``rls=`` option, and the option (``on``: True, ``off``: False,
    absent: None). ConfigError for another value."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    values = [v for k, v in query if k == "rls"]
    if not values:
        return url, None
    if values[-1] not in ("on", "off"):
        raise ConfigError(f"state: rls={values[-1]!r}; expected on or off")
    rest = urlencode([(k, v) for k, v in query if k != "rls"])
    return urlunsplit(parts._replace(query=rest)), values[-1] == "on"


def rls_on(conn: Any, schema: str) -> bool:
    """Whether the schema's namespace tables have row-level security on."""
    row = conn.execute("SELECT c.relrowsecurity FROM pg_class c JOIN pg_namespace n ON "
                       "n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'namespaces'",
                       (schema,)).fetchone()
    return bool(row and row[0])


def set_rls(conn: Any, schema: str, where: str, *, on: bool) -> None:
    """Put the policies on (or take them off: the grants stay, unused) in one transaction;
    only the tables' owner may."""
    owner = conn.execute(f"SELECT pg_has_role(current_user, c.relowner, 'MEMBER') FROM pg_class c "
                         f"WHERE c.oid = '{schema}.meta'::regclass").fetchone()[0]
    if not owner:
        raise StateError(f"{where}: only the owner of the schema's tables may turn row-level "
                         f"security {'on' if on else 'off'}")
    with conn.transaction():
        if on:
            for statement in _policy_sql(schema):
                conn.execute(statement)
            return
        for table in TENANT_TABLES:
            conn.execute(f"DROP POLICY IF EXISTS tenant ON {schema}.{table}")
            conn.execute(f"ALTER TABLE {schema}.{table} NO FORCE ROW LEVEL SECURITY")
            conn.execute(f"ALTER TABLE {schema}.{table} DISABLE ROW LEVEL SECURITY")


def claim(conn: Any, namespaces: Sequence[str], where: str) -> None:
    """StateError unless the connection's role is granted every namespace of ``namespaces``
    (the message names the role and the first namespace refused: the caller's own request)."""
    row = conn.execute("SELECT n, current_user FROM unnest(%s::text[]) AS n WHERE NOT granted(n) "
                       "LIMIT 1", (list(namespaces),)).fetchone()
    if row is not None:
        raise StateError(f"{where}: role {row[1]!r} is not granted namespace {row[0]!r} "
                         f"(row-level security; the schema owner grants it with "
                         f"'heaprank state grant URL ROLE NAMESPACE')")
