"""A PostgreSQL you already run: learned state in a schema of its own (``heaprank`` by
default), shared by every process and host that reaches the server. Needs the ``postgres``
extra (psycopg 3 and its connection pool): ``pip install 'heaprank[postgres]'``."""

from .backend import PostgresState

__all__ = ["PostgresState"]
