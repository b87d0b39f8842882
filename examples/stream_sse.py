"""The router's stages as Server-Sent Events, with Starlette.

A user interface can show the chunks as soon as they are retrieved, each chunk's
grade as soon as the gate has graded it, and the correction when it comes,
before the generator has anything to say: ``CRAG.astream`` yields one event per
stage, and this app sends each as one SSE event (``event: <stage>``, ``data:``
the event's ``to_dict()`` as JSON), the last one ``done`` with the whole result.

    pip install starlette uvicorn
    python examples/stream_sse.py [--port 8000]
    curl -N 'http://127.0.0.1:8000/retrieve?q=How+were+Roman+roads+built%3F&k=3'

It serves the bundled sample corpus (no model, no network). A blank query or a
bad ``k`` is a 400 with a JSON error; a retrieval that fails after the stream
started is an ``event: error``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from crag_heuristic import CRAG, BM25Retriever, CragError, InputError
from crag_heuristic.events import StageEvent
from crag_heuristic.sample import load_sample_corpus, sample_retriever


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event (JSON is one line: newlines in strings are escaped)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _events(stream: AsyncIterator[StageEvent]) -> AsyncIterator[str]:
    try:
        async for event in stream:
            yield sse(event.stage.value, event.to_dict())
    except CragError as exc:  # the first retrieval failed: there is nothing to correct
        yield sse("error", {"error": type(exc).__name__, "message": str(exc)})


def build_app(crag: CRAG) -> Starlette:
    """``GET /retrieve?q=...&k=...``: the stages of ``crag`` for ``q`` as SSE."""

    async def retrieve(request: Request) -> Response:
        query = request.query_params.get("q", "")
        try:
            k = int(request.query_params.get("k", "5"))
            stream = crag.astream(query, k)  # a bad query or k is refused here, at once
        except (InputError, ValueError) as exc:
            return JSONResponse({"error": type(exc).__name__, "message": str(exc)}, 400)
        return StreamingResponse(
            _events(stream),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return Starlette(routes=[Route("/retrieve", retrieve)])


def sample_router() -> CRAG:
    """The router on the bundled sample, with BM25 for the PARTIAL correction."""
    return CRAG(sample_retriever(), lexical=BM25Retriever(load_sample_corpus()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(build_app(sample_router()), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
