"""A real OpenAI-compatible chat-completions server for tests, answering from recorded labels.

:class:`OpenAIServer` starts a small Starlette app (:func:`build_app`) under
uvicorn, in its own process, on a free loopback port, and waits until it
answers. It serves ``POST /v1/chat/completions`` as an LLM judge would: it
finds the question and the passages in the prompt (by the texts of a
recording: ``queries.jsonl``, ``corpus.jsonl`` and a label file
``llm_judgments/<labels>.tsv``, the layout of the shared collections, written
by :func:`write_recording`), looks up each passage's recorded score and
answers one grade per passage, in the style a test asks for. A test programs
faults over a control API, each consumed by the next request:
:class:`ServerReply` (an HTTP status with ``Retry-After``, a slow answer, a
raw body, a given answer text, a truncated answer, a wrong count ...), or
kept for every request about one recorded query (``configure(by_query=...)``).
It can also refuse structured output as a server without it does
(``configure(refuse_schema=True)``: a request with ``response_format`` gets
OpenAI's 400), list its models at ``GET /v1/models`` (``configure(models=
[...])``; without, the route answers 404 as servers without it do), and die
(``configure(exit_after=n)``: the process exits on request ``n + 1``, without
answering it: a server killed mid-run).

The prompt's wording is not read: the question is the longest recorded query
text found in the messages and the passages are the recorded corpus texts
found there, in the order they appear (so no corpus text may hold another).
A passage that is not in the corpus, or has no label, is answered "no" (0).

Typical use (a pytest fixture would scope it to the module)::

    folder = write_recording(tmp, queries={...}, corpus={...}, labels={...})
    with OpenAIServer(folder, labels="judge", api_key="sk-test") as server:
        server.program(ServerReply(status=429, headers={"Retry-After": "0"}))
        grader = OpenAIGrader(base_url=server.url, model="judge", api_key="sk-test")
        ...
        server.stats()["requests"]

Each answer's ``usage`` counts words: ``prompt_tokens`` the messages' words,
``completion_tokens`` the answer's. The control calls use ``urllib``, not
httpx, so that a test capturing httpx's log sees the grader's requests only.
Nothing here reads the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.util
import json
import os
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._errors import OpenAIServerError, OpenAIServerUnavailable
from ._process import ServerProcess

__all__ = [
    "STYLES",
    "OpenAIServer",
    "OpenAIServerError",
    "OpenAIServerUnavailable",
    "ServerReply",
    "build_app",
    "write_recording",
]

STYLES = ("json_yes_no", "json_numbers", "json_0_3", "json_single", "fenced", "text", "think")
"""How the server writes a correct answer (``ServerReply.style``):

* ``json_yes_no``: ``{"grades": ["yes", "no"]}`` (the default);
* ``json_numbers``: ``{"grades": [0.667, 0.0]}`` (score / 3, three decimals);
* ``json_0_3``: ``{"grades": [2, 0]}`` (the recorded scores);
* ``json_single``: ``{"grade": "yes"}`` (one passage only);
* ``fenced``: the ``json_yes_no`` answer in a ```` ```json ```` fence, after a sentence;
* ``text``: ``1. Yes.`` / ``2. No.`` lines (``Yes.`` alone for one passage);
* ``think``: a ``<think>...</think>`` block, then the ``json_yes_no`` answer.
"""

_CONTROL = "/_testkit"


@dataclass(frozen=True, kw_only=True)
class ServerReply:
    """How the server answers one request (programmed with :meth:`OpenAIServer.program`).

    Attributes:
        status: the HTTP status; not 200: an OpenAI-style error body
            (``{"error": {"message": ...}}``) unless ``body`` is given.
        headers: extra response headers (``{"Retry-After": "1"}``).
        delay: seconds to wait before answering (a slow model).
        body: a raw response body sent as is (a body that is not JSON ...).
        content: the assistant message's text, sent instead of the graded answer.
        style: how a correct answer is written (:data:`STYLES`; ``None``: the
            server's default).
        count_delta: grades added (``"no"``) or dropped (from the end): a wrong count.
        truncate: send only the first half of the answer text, with
            ``finish_reason: "length"``.
        echo_authorization: put the request's ``Authorization`` header in the
            error message (a server that echoes the key).
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: str | None = None
    content: str | None = None
    style: str | None = None
    count_delta: int = 0
    truncate: bool = False
    echo_authorization: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["headers"] = dict(self.headers)
        return data


def write_recording(
    folder: str | os.PathLike[str],
    *,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    labels: Mapping[str, Mapping[str, int]],
    name: str = "judge",
) -> Path:
    """Write a recording in the collections' layout: ``queries.jsonl``,
    ``corpus.jsonl`` (``{"_id", "text"}`` a line) and ``llm_judgments/<name>.tsv``
    (``query-id<TAB>corpus-id<TAB>score``, a header line). Returns ``folder``."""
    root = Path(folder)
    (root / "llm_judgments").mkdir(parents=True, exist_ok=True)
    for file, rows in (("queries.jsonl", queries), ("corpus.jsonl", corpus)):
        with (root / file).open("w", encoding="utf-8") as out:
            for key, text in rows.items():
                out.write(json.dumps({"_id": key, "text": text}) + "\n")
    with (root / "llm_judgments" / f"{name}.tsv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        writer.writerow(["query-id", "corpus-id", "score"])
        for query_id, row in labels.items():
            for doc_id, score in row.items():
                writer.writerow([query_id, doc_id, score])
    return root


def _read_jsonl(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[str(row["_id"])] = str(row["text"])
    return out


def _read_labels(path: Path) -> dict[str, dict[str, int]]:
    labels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        next(rows, None)
        for row in rows:
            if len(row) >= 3:
                labels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return labels


class _Judge:
    """The server's state: the recording, the programmed replies, what it saw."""

    def __init__(self, folder: Path, labels: str, api_key: str | None) -> None:
        self.queries = _read_jsonl(folder / "queries.jsonl")
        self.corpus = _read_jsonl(folder / "corpus.jsonl")
        self.labels = _read_labels(folder / "llm_judgments" / f"{labels}.tsv")
        self.api_key = api_key
        self.reset()

    def reset(self) -> None:
        self.replies: list[ServerReply] = []
        self.default = ServerReply()
        self.by_query: dict[str, ServerReply] = {}
        self.refuse_schema = False
        self.models: list[str] | None = None
        self.exit_after: int | None = None
        self.relevant_min = 2
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def next_reply(self) -> ServerReply:
        return self.replies.pop(0) if self.replies else self.default

    def find(self, text: str) -> tuple[str | None, list[str]]:
        """The recorded query found in ``text`` (the longest) and the passages, in order."""
        found = [q for q, t in self.queries.items() if t and t in text]
        query = max(found, key=lambda q: len(self.queries[q]), default=None)
        spots = [(text.find(t), d) for d, t in self.corpus.items() if t and t in text]
        return query, [d for _, d in sorted(spots)]

    def answer(self, reply: ServerReply, text: str) -> tuple[str, str]:
        """The assistant's text and finish reason for a request whose messages are ``text``."""
        query, passages = self.find(text)
        scores = [self.labels.get(query or "", {}).get(d, 0) for d in passages]
        if reply.count_delta < 0:
            scores = scores[: len(scores) + reply.count_delta]
        style = reply.style or self.default.style or "json_yes_no"
        words: list[Any] = ["yes" if s >= self.relevant_min else "no" for s in scores]
        words += ["no"] * max(0, reply.count_delta)
        numbers: list[Any] = [round(s / 3, 3) for s in scores] + [0.0] * max(0, reply.count_delta)
        raw: list[Any] = list(scores) + [0] * max(0, reply.count_delta)
        if style == "json_numbers":
            content = json.dumps({"grades": numbers})
        elif style == "json_0_3":
            content = json.dumps({"grades": raw})
        elif style == "json_single":
            content = json.dumps({"grade": words[0] if words else "no"})
        elif style == "fenced":
            content = "Here are the grades:\n```json\n" + json.dumps({"grades": words}) + "\n```"
        elif style == "text":
            if len(words) == 1:
                content = f"{words[0].capitalize()}."
            else:
                content = "\n".join(f"{i}. {w.capitalize()}." for i, w in enumerate(words, 1))
        elif style == "think":
            content = "<think>Passage 1 looks off-topic: no.</think>\n" + json.dumps(
                {"grades": words}
            )
        else:
            content = json.dumps({"grades": words})
        if reply.content is not None:
            content = reply.content
        if reply.truncate:
            return content[: len(content) // 2], "length"
        return content, "stop"


def build_app(folder: str | os.PathLike[str], *, labels: str, api_key: str | None = None) -> Any:
    """The ASGI app (Starlette): ``POST /v1/chat/completions`` and the control API."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    judge = _Judge(Path(folder), labels, api_key)

    def error(status: int, message: str, headers: Mapping[str, str]) -> Response:
        body = {"error": {"message": message, "type": "test_error", "code": status}}
        return JSONResponse(body, status_code=status, headers=dict(headers))

    async def chat(request: Request) -> Response:
        judge.in_flight += 1
        judge.max_in_flight = max(judge.max_in_flight, judge.in_flight)
        try:
            if judge.exit_after is not None and len(judge.requests) >= judge.exit_after:
                os._exit(17)  # killed mid-run: this request is never answered
            reply = judge.next_reply()
            auth = request.headers.get("authorization")
            try:
                body = json.loads(await request.body())
            except ValueError:
                return error(400, "the body is not JSON", {})
            messages = body.get("messages") or []
            text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
            shape = body.get("response_format")
            judge.requests.append(
                {
                    "model": body.get("model"),
                    "authorization": auth,
                    "passages": None,
                    "response_format": shape.get("type") if isinstance(shape, dict) else None,
                }
            )
            if judge.api_key is not None and auth != f"Bearer {judge.api_key}":
                return error(401, f"Incorrect API key provided: {auth}", {})
            if judge.refuse_schema and shape is not None:
                message = (
                    "Invalid parameter: 'response_format' of type 'json_schema' is not "
                    "supported with this model."
                )
                return error(400, message, {})
            asked, _ = judge.find(text)
            if reply is judge.default and asked in judge.by_query:
                reply = judge.by_query[asked]
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            if reply.body is not None:
                return Response(reply.body, status_code=reply.status, headers=dict(reply.headers))
            if reply.status != 200:
                said = f" (you sent {auth})" if reply.echo_authorization else ""
                return error(reply.status, f"programmed status {reply.status}{said}", reply.headers)
            query, passages = judge.find(text)
            judge.requests[-1]["passages"] = len(passages)
            judge.requests[-1]["query"] = query
            content, finish = judge.answer(reply, text)
            prompt_tokens, completion_tokens = len(text.split()), len(content.split())
            judge.prompt_tokens += prompt_tokens
            judge.completion_tokens += completion_tokens
            return JSONResponse(
                {
                    "id": f"chatcmpl-{len(judge.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": finish,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
                headers=dict(reply.headers),
            )
        finally:
            judge.in_flight -= 1

    async def models(request: Request) -> Response:
        auth = request.headers.get("authorization")
        if judge.api_key is not None and auth != f"Bearer {judge.api_key}":
            return error(401, "Incorrect API key provided", {})
        if judge.models is None:
            return error(404, "File Not Found", {})
        rows = [{"id": m, "object": "model", "owned_by": "testkit"} for m in judge.models]
        return JSONResponse({"object": "list", "data": rows})

    async def program(request: Request) -> Response:
        data = json.loads(await request.body())
        judge.replies.extend(ServerReply(**r) for r in data.get("replies", []))
        if "default" in data:
            judge.default = ServerReply(**data["default"])
        if "relevant_min" in data:
            judge.relevant_min = int(data["relevant_min"])
        if "by_query" in data:
            judge.by_query = {q: ServerReply(**r) for q, r in data["by_query"].items()}
        for name in ("refuse_schema", "models", "exit_after"):
            if name in data:
                setattr(judge, name, data[name])
        return JSONResponse({"queued": len(judge.replies)})

    async def reset(request: Request) -> Response:
        judge.reset()
        return JSONResponse({"ok": True})

    async def stats(request: Request) -> Response:
        return JSONResponse(
            {
                "requests": len(judge.requests),
                "seen": judge.requests,
                "max_in_flight": judge.max_in_flight,
                "queued": len(judge.replies),
                "prompt_tokens": judge.prompt_tokens,
                "completion_tokens": judge.completion_tokens,
            }
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route(f"{_CONTROL}/program", program, methods=["POST"]),
            Route(f"{_CONTROL}/reset", reset, methods=["POST"]),
            Route(f"{_CONTROL}/stats", stats, methods=["GET"]),
            Route(f"{_CONTROL}/health", health, methods=["GET"]),
        ]
    )


class OpenAIServer(ServerProcess):
    """The chat-completions server of :func:`build_app` under uvicorn, in its own process.

    Args:
        folder: a recording (:func:`write_recording`).
        labels: the label file's name in ``llm_judgments/`` (without ``.tsv``).
        api_key: the key requests must send (``Authorization: Bearer``);
            ``None``: any request is served.
        port: the port; ``None`` picks a free one (three tries on a race).
        startup_timeout: seconds to wait for the server to answer.

    :meth:`start` runs ``python -m crag_testkit._openai_server`` in its own
    process group and waits for its health route; :meth:`stop` terminates the
    group (then kills it) (:class:`~crag_testkit._process.ServerProcess`). Use
    it as a context manager.

    Raises:
        OpenAIServerUnavailable: Starlette or uvicorn is not installed.
        OpenAIServerError: the server did not come up (its output attached).
    """

    name = "the chat-completions server"
    error = OpenAIServerError

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        labels: str = "judge",
        api_key: str | None = None,
        port: int | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__(port=port, startup_timeout=startup_timeout)
        self.folder = Path(folder)
        self.labels = labels
        self.api_key = api_key

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"OpenAIServer({str(self.folder)!r}, {state})"

    @property
    def root(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._bound_port}"

    @property
    def url(self) -> str:
        """The API's base URL, as an OpenAI client takes it: ``http://127.0.0.1:<port>/v1``."""
        return f"{self.root}/v1"

    def start(self) -> OpenAIServer:
        """Start the server and wait until it answers.

        Raises:
            OpenAIServerUnavailable: Starlette or uvicorn is missing.
            OpenAIServerError: it exited or did not answer within ``startup_timeout``.
        """
        missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
        if missing:
            raise OpenAIServerUnavailable(f"not installed: {', '.join(missing)}")
        return super().start()

    def _command(self, port: int, folder: Path) -> tuple[list[str], dict[str, str]]:
        support = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([support, *filter(None, [env.get("PYTHONPATH")])])
        command = [sys.executable, "-m", "crag_testkit._openai_server"]
        command += ["--folder", str(self.folder.resolve()), "--labels", self.labels]
        command += ["--port", str(port)]
        if self.api_key is not None:
            command += ["--api-key", self.api_key]
        return command, env

    def _answers(self) -> bool:
        self._control("GET", "health", timeout=1.0)
        return True

    # -- the control API -----------------------------------------------------------------

    def _control(
        self, method: str, route: str, data: Any = None, *, timeout: float = 5.0
    ) -> dict[str, Any]:
        body = None if data is None else json.dumps(data).encode("utf-8")
        request = urllib.request.Request(
            f"{self.root}{_CONTROL}/{route}",
            data=body,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            result: dict[str, Any] = json.loads(answer.read())
            return result

    def program(self, *replies: ServerReply) -> None:
        """Queue ``replies``: each answers the next request, in order."""
        self._control("POST", "program", {"replies": [r.to_json() for r in replies]})

    def configure(
        self,
        *,
        default: ServerReply | None = None,
        relevant_min: int | None = None,
        by_query: Mapping[str, ServerReply] | None = None,
        refuse_schema: bool | None = None,
        models: Sequence[str] | None = None,
        exit_after: int | None = None,
    ) -> None:
        """How requests without a queued reply are answered (``default``; those about
        a recorded query of ``by_query``, by its reply), the score from which a
        recorded pair is answered "yes" (default 2), whether a request asking for
        structured output is refused (``refuse_schema``), the models ``GET
        /v1/models`` lists (``models``; never set: 404), and after how many chat
        requests the process exits without answering (``exit_after``)."""
        data: dict[str, Any] = {}
        if default is not None:
            data["default"] = default.to_json()
        if relevant_min is not None:
            data["relevant_min"] = relevant_min
        if by_query is not None:
            data["by_query"] = {q: r.to_json() for q, r in by_query.items()}
        if refuse_schema is not None:
            data["refuse_schema"] = refuse_schema
        if models is not None:
            data["models"] = list(models)
        if exit_after is not None:
            data["exit_after"] = exit_after
        self._control("POST", "program", data)

    def reset(self) -> None:
        """Forget the queued replies, the counts and the default."""
        self._control("POST", "reset", {})

    def stats(self) -> dict[str, Any]:
        """``requests`` (a count), ``seen`` (per request: model, the Authorization
        header, the ``response_format`` type asked for, the passages found and
        the query id), ``max_in_flight``,
        ``queued``, ``prompt_tokens`` and ``completion_tokens`` (sent so far)."""
        return self._control("GET", "stats")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m crag_testkit._openai_server --folder DIR --labels NAME --port N``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--labels", default="judge")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    import uvicorn

    app = build_app(args.folder, labels=args.labels, api_key=args.api_key)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
