"""The test helpers themselves: venv bookkeeping, the fixture engine, settings."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from crag_testkit import (
    SEARXNG_PACKAGE,
    FixtureEngine,
    FixtureReply,
    HelperError,
    SearxngServer,
    SearxngStartError,
    SearxngUnavailable,
    ensure_searxng_venv,
    fixture_item,
)

from crag_heuristic import CragError


def test_the_kit_has_its_own_errors() -> None:
    """A test helper failing to start a server is not the library failing."""
    for error in (SearxngStartError, SearxngUnavailable):
        assert issubclass(error, HelperError) and not issubclass(error, CragError)


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_an_installed_venv_is_reused_without_running_anything(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    python.parent.mkdir(parents=True)
    python.write_text("not really python")
    (venv / ".crag-searxng-installed").write_text(SEARXNG_PACKAGE + "\n")
    # an interpreter that cannot run proves nothing is run
    assert ensure_searxng_venv(venv, python=tmp_path / "missing-python") == python


def fake_python(folder: Path, version: str) -> Path:
    """A shell script that prints ``version`` whatever it is asked (POSIX only)."""
    script = folder / f"python{version}"
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(0o755)
    return script


@pytest.mark.skipif(os.name != "posix", reason="uses a shell script as python")
def test_a_venv_without_the_marker_is_emptied_and_rebuilt(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("left by an interrupted install")
    (venv / "lib").mkdir()
    # the fake "creates" nothing, so the install step then fails: proof it got that far
    with pytest.raises(SearxngUnavailable, match="pip install"):
        ensure_searxng_venv(venv, python=fake_python(tmp_path, "3.12"))
    assert sorted(p.name for p in venv.iterdir()) == [".crag-searxng-install.lock"]
    assert not (venv / ".crag-searxng-installed").exists()


def test_a_python_that_cannot_run_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SearxngUnavailable, match="cannot run"):
        ensure_searxng_venv(tmp_path / "venv", python=tmp_path / "missing-python")


@pytest.mark.skipif(os.name != "posix", reason="uses a shell script as python")
def test_an_old_python_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(SearxngUnavailable, match=r"Python >= 3.11"):
        ensure_searxng_venv(tmp_path / "venv", python=fake_python(tmp_path, "3.9"))


@pytest.mark.skipif(os.name != "posix", reason="the lock is POSIX flock")
def test_the_lock_serialises_installs(tmp_path: Path) -> None:
    from crag_testkit._searxng_venv import _file_lock

    order: list[str] = []
    lock_path = tmp_path / "venv.lock"

    def holder(name: str) -> None:
        with _file_lock(lock_path):
            order.append(name + ">")
            time.sleep(0.05)
            order.append("<" + name)

    threads = [threading.Thread(target=holder, args=(str(i),)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    # never interleaved: each enter is followed by its own exit
    assert all(order[i][:-1] == order[i + 1][1:] for i in range(0, len(order), 2))


def test_fixture_engine_answers_as_programmed() -> None:
    with FixtureEngine() as engine:
        engine.program("solar", FixtureReply(items=[fixture_item("https://a.org", "A", "a")]))
        engine.program("solar", FixtureReply(status=500), engine="backup")
        engine.program("junk", FixtureReply(body=b"<html>"))
        status, body = fetch(engine.url + "/api?q=solar&engine=fixture")
        assert (status, json.loads(body)) == (
            200,
            {"items": [{"link": "https://a.org", "name": "A", "snippet": "a"}]},
        )
        assert fetch(engine.url + "/api?q=solar&engine=backup")[0] == 500
        assert fetch(engine.url + "/api?q=junk")[1] == b"<html>"
        assert json.loads(fetch(engine.url + "/api?q=other")[1]) == {"items": []}
        assert engine.requests == [
            ("fixture", "solar"),
            ("backup", "solar"),
            ("", "junk"),
            ("", "other"),
        ]
        engine.reset()
        assert engine.requests == []
        assert json.loads(fetch(engine.url + "/api?q=solar")[1]) == {"items": []}


def test_fixture_engine_stops_even_with_a_slow_reply_pending() -> None:
    engine = FixtureEngine().start()
    engine.program("slow", FixtureReply(delay=120))

    def call() -> None:
        with contextlib.suppress(OSError):  # the engine hangs up without answering
            fetch(engine.url + "/api?q=slow")

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    deadline = time.monotonic() + 10
    while not engine.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    engine.stop()
    caller.join(timeout=30)
    assert not caller.is_alive()
    assert time.monotonic() - started < 60  # not the 120 s of the reply


def test_settings_follow_the_options() -> None:
    server = SearxngServer(
        sys.executable,
        "http://127.0.0.1:9",
        json_enabled=False,
        engine_timeout=4.0,
        engine_names=("fixture", "backup"),
    )
    settings = server.settings(18888)
    assert settings["use_default_settings"] == {"engines": {"keep_only": []}}
    assert settings["search"]["formats"] == ["html"]
    assert settings["server"]["port"] == 18888
    assert settings["server"]["bind_address"] == "127.0.0.1"
    assert settings["server"]["limiter"] is False
    assert settings["server"]["secret_key"] != "ultrasecretkey"
    assert settings["server"]["secret_key"] != server.settings(18888)["server"]["secret_key"]
    assert settings["plugins"] == {}
    assert [e["name"] for e in settings["engines"]] == ["fixture", "backup"]
    assert settings["engines"][1]["search_url"] == "http://127.0.0.1:9/api?q={query}&engine=backup"
    assert {e["timeout"] for e in settings["engines"]} == {4.0}
    assert all(e["engine"] == "json_engine" and e["enable_http"] for e in settings["engines"])
    assert yaml.safe_load(yaml.safe_dump(settings)) == settings
    assert SearxngServer(sys.executable, "x").settings(1)["search"]["formats"] == ["html", "json"]


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    # the project's own python has no searx module: the process exits at once
    server = SearxngServer(sys.executable, "http://127.0.0.1:9", port=1, startup_timeout=30)
    with pytest.raises(SearxngStartError, match="searx"):
        server.start()
    assert not server.running
