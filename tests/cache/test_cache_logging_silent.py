"""A failing cache is silent on stderr unless the application configures logging.

Regression: the cache logs its failures at WARNING, and with no handler
anywhere the stdlib printed them (``crag.cache``) on stderr through
``logging.lastResort``. The library logger now has a ``NullHandler``. Each
case runs in a fresh interpreter: pytest's own logging handlers would hide
the problem in this process.
"""

from __future__ import annotations

import socket
import subprocess
import sys

SCRIPT = """
import logging, sys
if sys.argv[2] == "configured":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
from crag_heuristic import CacheError, RedisCache
cache = RedisCache(url=f"redis://127.0.0.1:{sys.argv[1]}/0", unsigned="allow")
try:
    cache.get("key")
except CacheError as exc:
    print("raised", exc.kind)
"""


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it any more


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(closed_port()), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_cache_failure_prints_nothing_without_logging_configured() -> None:
    done = run("bare")
    assert done.stdout.strip() == "raised connection"
    assert done.stderr == ""


def test_cache_failure_reaches_the_application_handlers_when_configured() -> None:
    done = run("configured")
    assert done.stdout.strip() == "raised connection"
    assert "WARNING crag_heuristic crag.cache" in done.stderr
