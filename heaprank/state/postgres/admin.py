"""``heaprank state migrate`` for a PostgreSQL state: create heaprank's schema, or check the one
there is and bring it to this heaprank's version (there is one version so far: nothing to
convert yet), without a state being opened; with ``rls=on`` (``off``) in the URL, turn
row-level security per namespace on (off) too. ``heaprank state grant`` / ``revoke``: a role's
access to a namespace (or a prefix) under row-level security (:mod:`.rls`)."""

from __future__ import annotations

import math
from typing import Any

from ..._optional import require
from ...errors import ConfigError, StateError
from .failures import redacted, state_error
from .rls import TENANT_TABLES, rls_on, rls_option, set_rls
from .schema import check_schema, read_meta, schema_name
from .url import postgres_options


def _admin(url: str, command: str) -> tuple[Any, str, str, int]:
    """``(libpq URL, schema, where, connect timeout)`` of an admin command's URL."""
    conninfo, options = postgres_options(url)
    if options.get("read_only"):
        raise ConfigError(f"state {command}: mode=ro in the URL, but {command} writes the schema")
    schema = schema_name(options.get("schema", "heaprank"))
    where = f"PostgreSQL state {redacted(conninfo)} (schema {schema})"
    return conninfo, schema, where, max(1, math.ceil(options.get("timeout_s", 5.0)))


def migrate_url(url: str) -> dict[str, Any]:
    """Create or check the schema a ``postgresql://`` URL names (and with ``rls=on``/``off``,
    turn row-level security on or off): its name, its version, whether it was created now and
    whether row-level security is on."""
    psycopg = require("psycopg", extra="postgres", feature="the PostgreSQL state")
    url, rls = rls_option(url)
    conninfo, schema, where, timeout = _admin(url, "migrate")
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout) as conn:
            created = read_meta(conn, schema, where) is None
            version = check_schema(conn, schema, where, read_only=False)
            if rls is not None and rls != rls_on(conn, schema):
                set_rls(conn, schema, where, on=rls)
            on = rls_on(conn, schema)
    except psycopg.Error as exc:
        raise state_error(where, exc) from None
    return {"schema": schema, "schema_version": version, "created": int(created),
            "rls": int(on)}


def grant_url(url: str, role: str, namespace: str, *, revoke: bool = False) -> dict[str, Any]:
    """Grant ``role`` the namespace ``namespace`` (ending in ``*``: every namespace starting
    with what precedes it) of a schema with row-level security on, and the table rights a
    state needs; ``revoke``: take that grant back (and the rights with the role's last grant).
    Returns how many grants the role holds now."""
    psycopg = require("psycopg", extra="postgres", feature="the PostgreSQL state")
    from psycopg import sql

    if not role or not namespace or namespace == "*":
        raise ConfigError("state grant: ROLE and NAMESPACE must not be empty (nor NAMESPACE "
                          "a bare '*': grant a prefix, e.g. 'team:*')")
    prefix = namespace.endswith("*")
    name = namespace[:-1] if prefix else namespace
    conninfo, schema, where, timeout = _admin(url, "grant")
    who, s = sql.Identifier(role), sql.Identifier(schema)
    tables = sql.SQL(", ").join(sql.Identifier(schema, t) for t in (*TENANT_TABLES, "features"))
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout) as conn:
            if read_meta(conn, schema, where) is None or not rls_on(conn, schema):
                raise StateError(f"{where}: row-level security is off; turn it on first with "
                                 f"'heaprank state migrate URL?rls=on'")
            with conn.transaction():
                if revoke:
                    conn.execute(f"DELETE FROM {schema}.grants WHERE role = %s AND "
                                 f"namespace = %s AND prefix = %s", (role, name, prefix))
                else:
                    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, who))
                    conn.execute(sql.SQL("GRANT SELECT ON {}, {} TO {}").format(
                        sql.Identifier(schema, "meta"), sql.Identifier(schema, "grants"), who))
                    conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}")
                                 .format(tables, who))
                    conn.execute(f"INSERT INTO {schema}.grants VALUES (%s, %s, %s) "
                                 f"ON CONFLICT DO NOTHING", (role, name, prefix))
                held = conn.execute(f"SELECT count(*) FROM {schema}.grants WHERE role = %s",
                                    (role,)).fetchone()[0]
                if revoke and not held:
                    conn.execute(sql.SQL("REVOKE ALL ON {}, {}, {} FROM {}").format(
                        tables, sql.Identifier(schema, "meta"), sql.Identifier(schema, "grants"),
                        who))
                    conn.execute(sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}").format(s, who))
    except psycopg.Error as exc:
        raise state_error(where, exc) from None
    return {"schema": schema, "grants": int(held)}
