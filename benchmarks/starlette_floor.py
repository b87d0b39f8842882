"""The floor the gate service is measured against: a minimal Starlette app on the same
uvicorn, making the same library call and answering the same JSON.

    python benchmarks/starlette_floor.py --index DIR [--port 0]

Prints ``floor on http://127.0.0.1:PORT`` on stderr once it listens, then serves until it
is stopped (SIGTERM). One route, ``POST /v2/retrieve`` ``{"query", "k"}``: ``await
crag.aretrieve(query, k)`` on ``CRAG.from_index_dir(DIR)`` (what ``crag-heuristic serve``
serves) and Starlette's ``JSONResponse`` of ``result_answer(result)`` (the service's v2
answer). Nothing else: no key, no limit, no request id, no slot, no deadline, no error
typing, no log, no metric. uvicorn runs as the service runs it (``run_server``): its
settings, a TCP socket bound first, in the main thread. benchmarks/own_corpus.py starts it.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from crag_heuristic import CRAG
from crag_heuristic.serve import result_answer


def floor_app(crag: CRAG) -> Starlette:
    """The minimal app over ``crag``."""

    async def retrieve(request: Request) -> JSONResponse:
        body = await request.json()
        result = await crag.aretrieve(body["query"], body.get("k"))
        return JSONResponse(result_answer(result))

    return Starlette(routes=[Route("/v2/retrieve", retrieve, methods=["POST"])])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = floor_app(CRAG.from_index_dir(args.index))
    # as crag_heuristic.serve's run_server binds it: a socket that says it is TCP (asyncio
    # then sets TCP_NODELAY on its connections)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                sys.stderr.write(f"floor on {url}\n")
                sys.stderr.flush()

    config = uvicorn.Config(
        app, log_config=None, log_level="warning", access_log=False, lifespan="on",
        server_header=False,
    )  # fmt: skip
    Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
