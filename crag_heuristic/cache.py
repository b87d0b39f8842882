"""Caches of evaluations, grades and web results.

:class:`MemoryCache` (in process, the default), :class:`RedisCache` (shared
between processes) and :class:`TieredCache` (a bounded in-process tier in
front of a shared one: a repeated query never pays a round trip), with their
counters, :class:`CacheStats` (``tiers`` holds each tier's). The first two
and the counters are top-level names too. :func:`evaluation_key` is the key
the router stores an evaluation under (to read one another process stored).
:class:`UnsignedStoreWarning` is what a store others can write to (a
``RedisCache``, a ``TieredCache`` in front of a shared tier of your own, a
``RedisGradeLog``) issues when it is made without a secret.
"""

from ._cache.keys import evaluation_key
from ._cache.memory import MemoryCache
from ._cache.redis import RedisCache
from ._cache.stats import CacheStats
from ._cache.tiered import TieredCache
from ._exceptions import UnsignedStoreWarning

__all__ = [
    "CacheStats",
    "MemoryCache",
    "RedisCache",
    "TieredCache",
    "UnsignedStoreWarning",
    "evaluation_key",
]
