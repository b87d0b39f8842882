"""Caching of evaluations and web results: keys, the in-process LRU, Redis.

* :mod:`.keys`: deterministic SHA-256 cache keys (``crag:v<version>:<kind>:<hex>``).
* :mod:`.memory`: :class:`MemoryCache`, the embedded default.
* :mod:`.redis`: :class:`RedisCache` on redis-py, sync and async, fail-fast when down.
* :mod:`.tiered`: :class:`TieredCache`, an in-process tier in front of a shared one.
* :mod:`.health`: error kinds and the down window; :mod:`.clients`: fail-fast clients.
* :mod:`.codec`: values are JSON text only, never pickle.
* :mod:`.stats`: :class:`CacheStats` snapshots.

The caches implement the ``Cache`` and ``AsyncCache`` protocols of
:mod:`crag_heuristic._protocols`, and every failure is a
:class:`~crag_heuristic.CacheError`. Events are logged through structlog as
``crag.cache``.
"""
