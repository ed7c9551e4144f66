"""``heaprank state migrate`` for a PostgreSQL state: create heaprank's schema, or check the one
there is and bring it to this heaprank's version (there is one version so far: nothing to
convert yet), without a state being opened."""

from __future__ import annotations

import math
from typing import Any

from ..._optional import require
from ...errors import ConfigError
from .failures import redacted, state_error
from .schema import check_schema, read_meta, schema_name
from .url import postgres_options


def migrate_url(url: str) -> dict[str, Any]:
    """Create or check the schema a ``postgresql://`` URL names: its name, its version, and
    whether it was created now."""
    psycopg = require("psycopg", extra="postgres", feature="the PostgreSQL state")
    conninfo, options = postgres_options(url)
    if options.get("read_only"):
        raise ConfigError("state migrate: mode=ro in the URL, but migrate writes the schema")
    schema = schema_name(options.get("schema", "heaprank"))
    where = f"PostgreSQL state {redacted(conninfo)} (schema {schema})"
    timeout = max(1, math.ceil(options.get("timeout_s", 5.0)))
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout) as conn:
            created = read_meta(conn, schema, where) is None
            version = check_schema(conn, schema, where, read_only=False)
    except psycopg.Error as exc:
        raise state_error(where, exc) from None
    return {"schema": schema, "schema_version": version, "created": int(created)}
