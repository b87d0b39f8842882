"""Caching of evaluations and web results: keys, the in-process LRU.

* :mod:`.keys`: deterministic SHA-256 cache keys (``crag:v<version>:<kind>:<hex>``).
* :mod:`.memory`: :class:`MemoryCache`, the embedded default.
* :mod:`.codec`: values are JSON text only, never pickle.
* :mod:`.stats`: :class:`CacheStats` snapshots.
"""

from .codec import dumps, loads
from .keys import KEY_SCHEMA, cache_key, canonical_json, evaluation_key, text_digest, web_key
from .memory import MemoryCache
from .stats import CacheStats

__all__ = [
    "KEY_SCHEMA",
    "CacheStats",
    "MemoryCache",
    "cache_key",
    "canonical_json",
    "dumps",
    "evaluation_key",
    "loads",
    "text_digest",
    "web_key",
]
