"""Slow clients against ``crag-heuristic serve`` run with 128 file descriptors.

The same code as ``python benchmarks/slow_clients.py``, with short timeouts: 200
connections that never finish their headers and 50 that trickle their body hold
the server, and a client sending whole requests is still answered; every slow
connection is closed by the server (the slow bodies with a 504); the server's
log stays small. Asserted on events (answered, closed), never on how fast: the
benchmark's committed run has the times.
"""

from __future__ import annotations

from types import ModuleType

import pytest

pytestmark = pytest.mark.slow


def test_slow_clients_cannot_lock_out_a_whole_request(slow_clients: ModuleType) -> None:
    settings = slow_clients.SlowSettings(
        slow_headers=200, slow_bodies=50, nofile=128, timeout=1.0, header_timeout=1.0,
        byte_every=0.5, probes=5, probe_every=0.1, give_up=60.0,
    )  # fmt: skip
    result = slow_clients.run_slow_clients(settings)
    probes, slow = result["probes"], result["slow"]
    assert probes["statuses"] == {"200": 5}, result
    for kind in ("header", "body"):
        assert slow[kind]["connections"] == slow[kind]["closed"], (kind, result)
        assert slow[kind]["still_open"] == 0
    # a slow body is answered 504 (its read is under the request's deadline) unless it
    # was shed first, at the connection cap (then closed without an answer)
    assert set(slow["body"]["answers"]) <= {"HTTP/1.1 504 Gateway Timeout", "(none)"}
    assert "HTTP/1.1 504 Gateway Timeout" in slow["body"]["answers"]
    assert slow["header"]["answers"] == {"(none)": 200}
    assert result["stderr_bytes"] < slow_clients.MAX_STDERR
    assert "Traceback" not in result["stderr_tail"]
