"""Fixtures of the integration tests: the Redis servers live in ``redis_servers``."""

from tests.integration.redis_servers import aof_server, redis_cluster_url, redis_url

__all__ = ["aof_server", "redis_cluster_url", "redis_url"]
