"""Redis (and Redis Cluster): learned state shared by many workers and hosts
(``pip install 'heaprank[redis]'``; redis-py is imported when a state connects)."""

from .async_backend import AsyncRedisState
from .backend import RedisState

__all__ = ["AsyncRedisState", "RedisState"]
