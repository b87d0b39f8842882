"""Fixtures for the cache tests: real redis-server processes, never mocks.

``redis_server`` is one server for the whole session (or the external one
named by ``CRAG_TEST_REDIS_URL``, read here, when the fixture runs);
``local_redis`` is a fresh process per test, for tests that kill, restart,
pause or fill the server. Each test gets its own key ``namespace`` so tests
sharing a server never see each other's keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import redis
from crag_testkit import RedisServer


class FakeClock:
    """A monotonic clock moved by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer.from_env()
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def patient_redis_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``RedisCache`` built from a URL waits 0.25 s for Redis by default (a hung cache
    must not slow queries down). On a loaded test machine Redis answered later now and
    then, and a test that is not about timeouts failed with a ``timeout`` CacheError:
    here (tests/cache) the defaults are 5 s. The tests about timeouts pass their own;
    elsewhere (the service under load and its Redis fault) the defaults stand."""
    from crag_heuristic._cache.redis import RedisCache

    defaults = dict(RedisCache.__init__.__kwdefaults__ or {})
    defaults.update(socket_timeout=5.0, socket_connect_timeout=5.0)
    monkeypatch.setattr(RedisCache.__init__, "__kwdefaults__", defaults)


@pytest.fixture
def local_redis() -> Iterator[RedisServer]:
    with RedisServer(maxmemory_policy="noeviction") as server:
        yield server


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]
    return f"test-{digest}"


@pytest.fixture
def admin(redis_server: RedisServer, namespace: str) -> Iterator[redis.Redis]:
    """A plain client on the session server; removes the test's keys afterwards."""
    client = redis_server.client(socket_timeout=5, socket_connect_timeout=5)
    yield client
    for name in client.scan_iter(match=f"{namespace}:*"):
        client.delete(name)
    client.close()
