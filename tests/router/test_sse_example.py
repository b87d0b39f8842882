"""examples/stream_sse.py: the stage events as Server-Sent Events, served by a real
uvicorn server (in a thread, on a free port) and read by a real HTTP client."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn

from crag_heuristic import CRAG, Chunk
from crag_heuristic.events import Stage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "stream_sse.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stream_sse_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_example()


@pytest.fixture(scope="module")
def crag(example: ModuleType) -> CRAG:
    router: CRAG = example.sample_router()
    return router


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """``app`` on a real uvicorn server in a thread, on a free loopback port."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def base_url(example: ModuleType, crag: CRAG) -> Iterator[str]:
    with serve(example.build_app(crag)) as url:
        yield url


def read_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """Parse an SSE body: ``event:`` / ``data:`` lines, a blank line ends each event."""
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    return events


def stable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("timings_ms", "cache_hit")}


@pytest.mark.parametrize(
    ("query", "stages"),
    [
        ("How were Roman roads built?", ["retrieved", "evaluated", "done"]),
        ("Which chess openings are best for beginners?", ["retrieved", "evaluated", "web", "corrected", "done"]),
    ],
)  # fmt: skip
def test_stages_stream_as_server_sent_events(
    base_url: str, crag: CRAG, query: str, stages: list[str]
) -> None:
    with httpx.stream("GET", f"{base_url}/retrieve", params={"q": query, "k": 3}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    assert [name for name, _ in events] == stages
    assert all(data["stage"] == name for name, data in events)
    retrieved, evaluated = events[0][1], events[1][1]
    ids = [chunk["id"] for chunk in retrieved["chunks"]]
    assert [grade["chunk_id"] for grade in evaluated["evaluation"]["chunks"]] == ids
    done = events[-1][1]["result"]
    assert stable(done) == stable(crag.retrieve(query, 3).to_dict())  # what retrieve returns
    assert Chunk.from_dict(retrieved["chunks"][0]) == crag.retrieve(query, 3).retrieved[0]
    assert Stage(events[-1][0]) is Stage.DONE


def test_bad_input_is_a_400_and_a_failed_retrieval_an_error_event(
    example: ModuleType, base_url: str
) -> None:
    blank = httpx.get(f"{base_url}/retrieve", params={"q": "  "})
    assert blank.status_code == 400 and blank.json()["error"] == "InvalidQueryError"
    bad_k = httpx.get(f"{base_url}/retrieve", params={"q": "roads", "k": "0"})
    assert bad_k.status_code == 400 and bad_k.json()["error"] == "InputError"

    class Broken:
        def search(self, query: str, k: int) -> list[Chunk]:
            raise RuntimeError("index offline")

    with (
        serve(example.build_app(CRAG(Broken()))) as url,
        httpx.stream("GET", f"{url}/retrieve", params={"q": "roads"}) as response,
    ):
        assert response.status_code == 200  # the stream had started
        events = read_events(response)
    assert events == [
        ("error", {"error": "RetrieverError",
                   "message": "Broken.search failed: RuntimeError: index offline"}),
    ]  # fmt: skip
