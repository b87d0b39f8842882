"""A seeded fuzz of the gate service's routes over raw sockets: no 5xx, every error JSON.

    python benchmarks/http_fuzz.py [--requests 20000] [--seed 32] [--concurrency 16]
                                   [--out benchmarks/results/http_fuzz]

The service (``create_app`` over the bundled sample, run by ``serving``: uvicorn
with the service's own connection handling, as ``crag-heuristic serve`` runs it)
with a 1 s request and header timeout, and ``--requests`` requests written as
raw bytes on new connections (no client library to tidy them), ``--concurrency``
at a time. Each request is one of (drawn with a seeded ``random.Random``):

* **bodies**: JSON for ``/v1/retrieve``, ``/v1/evaluate``, ``/v1/stream`` and their
  ``/v2`` twins (half of these with a ``view``, valid or not) with one mutation: a lone surrogate (``\\ud800`` escaped) in the query, a chunk's
  id, text or metadata, an option's name; huge numbers (``k`` of 5,000 digits,
  ``1e999``, ``-0``, ``NaN``, floats for integers); wrong types; deep nesting;
  long strings; unknown keys; empty and non-object bodies; bodies that are not
  UTF-8;
* **framing**: a request line, header or body the HTTP parser must refuse (bad
  methods and versions, spaces, a ``Content-Length`` that is not a number or
  disagrees with the body, duplicate lengths, ``Transfer-Encoding`` with a
  broken chunk, header lines without a colon, control bytes, headers past
  16 KiB), and bodies cut short;
* **routes**: other paths and methods, ``/healthz`` and ``/metrics`` with
  stray keys and bodies.

Counted per request: the answer's status, or **closed** (the server closed the
connection without an answer: a request it could not read and timed out) or
**no answer** (nothing within 30 s). Checks (exit status 1 unless all hold): no
5xx; every answer of 400 or more is JSON naming an ``error`` (a type) and its
``status``; no request left without an answer or a close. Writes
``http_fuzz.json`` and ``http_fuzz.md`` to ``--out``. :func:`run_fuzz` is the
whole fuzz as a function (``tests/serve/test_http_fuzz.py`` runs 400 requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

RESULTS = Path(__file__).resolve().parent / "results" / "http_fuzz"
ROUTES = (
    "/v1/retrieve",
    "/v1/evaluate",
    "/v1/stream",
    "/v2/retrieve",
    "/v2/evaluate",
    "/v2/stream",
)
SURROGATES = ("\\ud800", "\\udfff", "\\udc00", "\\ud83d", "x\\ud800y")
NUMBERS = (
    "1" + "0" * 5000, "-" + "9" * 4400, "1e999", "-1e999", "-0", "0.5", "1.0", "NaN",
    "Infinity", "-Infinity", "1e-400", "9007199254740993", "18446744073709551616", "true",
)  # fmt: skip


def _answer(o: Outcome) -> str:
    return "closed" if o.closed else ("no answer" if o.status is None else str(o.status))


@dataclass(frozen=True)
class Outcome:
    kind: str  # which case made the request (generator:case)
    status: int | None  # None: closed without an answer, or no answer
    closed: bool
    json_error: bool  # an answer >= 400 whose body is JSON with "error" and "status"
    seconds: float


def _request(path: str, body: bytes, *, method: str = "POST", headers: Sequence[str] = ()) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: gate", "Connection: close", *headers]
    if body or method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _valid_body(rng: random.Random, route: str) -> dict[str, Any]:
    query = rng.choice(["roman roads", "how do honeybees dance", "volcano", "x", "Café ☕"])
    if route.endswith("/evaluate"):
        chunks = [
            {"id": f"c{i}", "text": rng.choice(["Roman roads.", "Bees dance.", "Lava."]),
             "score": rng.random(), "score_kind": "cosine"}
            for i in range(rng.randint(1, 4))
        ]  # fmt: skip
        body: dict[str, Any] = {"query": query, "chunks": chunks}
    else:
        body = {"query": query, "k": rng.randint(1, 5)}
    if route.startswith("/v2/") and rng.random() < 0.5:  # a view, now and then not one
        body["view"] = rng.choice(["chunks", "grades", "ids", "", 1])
    return body


def _raw_json(data: Any, rng: random.Random) -> str:
    return json.dumps(data, ensure_ascii=rng.random() < 0.5)


def body_case(rng: random.Random) -> tuple[str, bytes]:
    """A JSON body with one mutation (see the module doc): its name and the request."""
    route = rng.choice(ROUTES)
    name, body = _body(rng, route)
    return f"body:{name}", _request(route, body)


def _body(rng: random.Random, route: str) -> tuple[str, bytes]:
    data = _valid_body(rng, route)
    text = _raw_json(data, rng)
    mutation = rng.randrange(12)
    name = BODY_MUTATIONS[mutation]
    if mutation == 0:  # a lone surrogate in the query
        text = text.replace('"query": "', f'"query": "{rng.choice(SURROGATES)}', 1)
    elif mutation == 1 and route.endswith("/evaluate"):  # in a chunk's id, text or metadata
        where = rng.choice(['"id": "', '"text": "'])
        text = text.replace(where, where + rng.choice(SURROGATES), 1)
        if rng.random() < 0.3:
            text = text.replace(
                '"score_kind"', f'"metadata": {{"{SURROGATES[0]}": 1}}, "score_kind"', 1
            )
    elif mutation == 1:  # in an option's name or value
        text = text[:-1] + f', "options": {{"{rng.choice(SURROGATES)}": "{SURROGATES[1]}"}}}}'
    elif mutation == 2:  # a huge or odd number for k (or a score)
        key = '"k": ' if '"k": ' in text else '"score": '
        start = text.index(key) + len(key)
        end = start
        while end < len(text) and text[end] not in ",}":
            end += 1
        text = text[:start] + rng.choice(NUMBERS) + text[end:]
    elif mutation == 3:  # a wrong type
        field = rng.choice(["query", "k", "chunks", "options"])
        data[field] = rng.choice([None, 7, 1.5, [], {}, "s", True, ["a"]])
        text = _raw_json(data, rng)
    elif mutation == 4:  # deep nesting
        depth = rng.choice([60, 70, 200, 2000])
        text = text[:-1] + ', "options": ' + "[" * depth + "]" * depth + "}"
    elif mutation == 5:  # a long string
        data["query"] = "roads " * rng.choice([10, 1000, 10_000, 200_000])
        text = _raw_json(data, rng)
    elif mutation == 6:  # unknown keys and options
        data[rng.choice(["extra", "", "__proto__", "k2"])] = 1
        data["options"] = {
            rng.choice(["web_ttl", "max_retries", "refine", "gate_k"]): rng.choice(NUMBERS[:6])
        }
        text = _raw_json(data, rng).replace('"' + NUMBERS[0] + '"', NUMBERS[0])
    elif mutation == 7:  # not an object, or empty
        text = rng.choice(["", "[]", "null", "1", '"query"', "{", "}", "[" * 10, "{}"])
    elif mutation == 8:  # not UTF-8
        return name, text.encode("utf-8")[:-1] + rng.choice([b"\xff}", b"\xc3}", b"\xed\xa0\x80}"])
    elif mutation == 9:  # many chunks, or options for the wrong route
        if route.endswith("/evaluate"):
            data["chunks"] = data["chunks"] * rng.choice([50, 60, 300])
        else:
            data["options"] = {"refine": "yes", "token_budget": -1}
        text = _raw_json(data, rng)
    elif mutation == 10:  # duplicate keys, whitespace, BOM
        text = rng.choice(["\ufeff", " \n\t", ""]) + text.replace("{", '{"query": 1, ', 1)
    return name, text.encode("utf-8", "surrogatepass")


BODY_MUTATIONS = (
    "surrogate in query", "surrogate in chunk or option", "huge number", "wrong type",
    "deep nesting", "long string", "unknown key", "not an object", "not UTF-8",
    "many chunks", "duplicate keys", "valid",
)  # fmt: skip


def framing_case(rng: random.Random) -> tuple[str, bytes]:
    """A request the HTTP parser must refuse, or one cut short (see the module doc): its
    name and the request."""
    route = rng.choice(ROUTES)
    body = _raw_json(_valid_body(rng, route), rng).encode("utf-8")
    choice = rng.randrange(14)
    name = f"framing:{FRAMINGS[choice]}"
    if choice == 0:
        return name, rng.choice([b"GARBAGE\r\n\r\n", b"\r\n\r\n", b"\x00\x01\x02\r\n\r\n"])
    if choice == 1:
        return name, f"POST {route} HTTP/9.9\r\nHost: g\r\n\r\n".encode()
    if choice == 2:
        return name, f"P OST {route} HTTP/1.1\r\nHost: g\r\n\r\n".encode()
    if choice == 3:
        length = rng.choice(["ten", "-1", "1e3", "0x10", " ", "99999999999999999999999"])
        return (
            name,
            f"POST {route} HTTP/1.1\r\nHost: g\r\nContent-Length: {length}\r\n\r\n".encode() + body,
        )
    if choice == 4:  # two lengths that disagree
        head = f"POST {route} HTTP/1.1\r\nHost: g\r\nContent-Length: {len(body)}\r\nContent-Length: 3\r\n\r\n"
        return name, head.encode() + body
    if choice == 5:  # a broken chunk
        head = f"POST {route} HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        return name, head.encode() + rng.choice([b"zz\r\n", b"5\r\nab\r\n0\r\n\r\n", b"-1\r\n"])
    if choice == 6:  # a header line without a colon, or with a control byte
        bad = rng.choice([b"Bad Header", b"X-A: \x00b", b"X-A\x7f: b", b" X-Fold: b", b": empty"])
        return name, f"POST {route} HTTP/1.1\r\nHost: g\r\n".encode() + bad + b"\r\n\r\n"
    if choice == 7:  # headers past 16 KiB, unfinished
        return name, f"POST {route} HTTP/1.1\r\nHost: g\r\nX-Big: ".encode() + b"a" * 20_000
    if choice == 8:  # a body shorter than its length: the body deadline
        return name, _request(route, body)[: -max(1, len(body) // 2)]
    if choice == 9:  # CL and TE together
        head = (f"POST {route} HTTP/1.1\r\nHost: g\r\nContent-Length: {len(body)}\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")  # fmt: skip
        return name, head.encode() + body
    if choice == 10:  # a target that is not a path
        target = rng.choice(["*", "http://other/v1/retrieve", "/v1/retrieve?x=%ff", "/%00", "//"])
        return name, f"POST {target} HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n".encode()
    if choice == 11:  # HTTP/1.0, no host
        return name, f"POST {route} HTTP/1.0\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    if choice == 12:  # non-ASCII in a header (a key, a request id)
        header = rng.choice(["X-API-Key", "X-Request-ID"])
        start = f"POST {route} HTTP/1.1\r\nHost: g\r\nConnection: close\r\n".encode()
        value = rng.choice(["clé".encode("latin-1"), "ключ".encode(), b"\xff\xfe", b"a" * 100])
        tail = f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        return name, start + header.encode() + b": " + value + tail + body
    return name, _request(route, body, headers=["Expect: 100-continue"])


UNFINISHED = ("framing:body cut short", "framing:length and chunked")
"""Bodies that never end: cut short, or a JSON body read as chunks whose first size
line never ends. The request deadline answers them (504), as documented."""
FRAMINGS = (
    "request line", "version", "method", "content-length", "two lengths", "broken chunk",
    "header line", "huge header", "body cut short", "length and chunked", "target",
    "HTTP/1.0", "non-ASCII header", "expect 100-continue",
)  # fmt: skip


def route_case(rng: random.Random) -> tuple[str, bytes]:
    """Other paths and methods; health and metrics with stray keys and bodies."""
    method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "POST"])
    path = rng.choice([*ROUTES, "/healthz", "/metrics", "/", "/v2/retrieve", "/healthz/../metrics"])
    headers = rng.choice([[], ["X-API-Key: " + "k" * rng.choice([1, 20, 5000])],
                          ["X-Request-ID: " + rng.choice(["ok-1", "bad id", "x" * 100])]])  # fmt: skip
    body = rng.choice([b"", b"{}", b'{"query": "roads"}'])
    return f"route:{method}", _request(path, body, method=method, headers=headers)


GENERATORS: dict[str, Callable[[random.Random], tuple[str, bytes]]] = {
    "body": body_case,
    "framing": framing_case,
    "route": route_case,
}


def _parse(answer: bytes, head_only: bool = False) -> tuple[int | None, bool]:
    """The status of an answer (past any 1xx interim answer), and whether an error
    answer is a JSON error (for a HEAD request, which has no body: said JSON)."""
    while answer.startswith(b"HTTP/1.1 1") and b"\r\n\r\n" in answer:  # 100 Continue
        answer = answer.partition(b"\r\n\r\n")[2]
    if not answer.startswith(b"HTTP/1."):
        return None, False
    head, _, body = answer.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None, False
    if status < 400:
        return status, True
    if head_only:
        return status, b"content-type: application/json" in head.lower()
    try:
        error = json.loads(body)
    except ValueError:
        return status, False
    return status, isinstance(error, dict) and "error" in error and error.get("status") == status


async def _send(host: str, port: int, kind: str, raw: bytes) -> Outcome:
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
    except (OSError, asyncio.TimeoutError):
        return Outcome(kind, None, False, False, time.monotonic() - started)
    answer = b""
    closed = False
    try:
        writer.write(raw)
        await writer.drain()
        while chunk := await asyncio.wait_for(reader.read(65536), 30):
            answer += chunk
        closed = True
    except (ConnectionError, OSError):
        closed = True
    except asyncio.TimeoutError:
        pass
    finally:
        writer.close()
    status, json_error = _parse(answer, raw.startswith(b"HEAD "))
    return Outcome(kind, status, closed and status is None, json_error, time.monotonic() - started)


async def fuzz(url: str, requests: int, seed: int, concurrency: int) -> list[Outcome]:
    """``requests`` seeded requests against ``url``, ``concurrency`` at a time."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    rng = random.Random(seed)
    cases = []
    for _ in range(requests):
        kind = rng.choices(list(GENERATORS), weights=(6, 3, 1))[0]
        cases.append(GENERATORS[kind](rng))
    limit = asyncio.Semaphore(concurrency)

    async def one(kind: str, raw: bytes) -> Outcome:
        async with limit:
            return await _send(host, int(port), kind, raw)

    return list(await asyncio.gather(*(one(kind, raw) for kind, raw in cases)))


def report(
    outcomes: Sequence[Outcome], *, seed: int, command: str, seconds: float
) -> dict[str, Any]:
    statuses = Counter(_answer(o) for o in outcomes)
    by_case: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_case.setdefault(o.kind, Counter())[_answer(o)] += 1
    faults = sum(1 for o in outcomes if o.status is not None and 500 <= o.status < 503)
    late = Counter(o.kind for o in outcomes if o.status == 504)
    other_5xx = sum(1 for o in outcomes if o.status is not None and o.status >= 503) - sum(
        n for kind, n in late.items() if kind in UNFINISHED
    )
    not_json = sum(
        1 for o in outcomes if o.status is not None and o.status >= 400 and not o.json_error
    )
    unanswered = sum(1 for o in outcomes if o.status is None and not o.closed)
    checks = {
        "no server fault (500, 501, 502)": faults == 0,
        "no 503, and no 504 but for a body that never ends (the deadline)": other_5xx == 0,
        "every error answer is a JSON error": not_json == 0,
        "every request answered or closed": unanswered == 0,
    }
    return {
        "command": command,
        "seed": seed,
        "requests": len(outcomes),
        "seconds": round(seconds, 1),
        "statuses": dict(sorted(statuses.items())),
        "by_case": {kind: dict(sorted(c.items())) for kind, c in sorted(by_case.items())},
        "server_faults": faults,
        "504_by_case": dict(late),
        "other_5xx": other_5xx,
        "not_json_errors": not_json,
        "no_answer": unanswered,
        "checks": checks,
        "passed": all(checks.values()),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# HTTP fuzz of the gate service",
        "",
        f"`{result['command']}`: {result['requests']:,} requests (seed {result['seed']}) "
        f"in {result['seconds']} s.",
        "",
        "| answer | requests |",
        "|---|---|",
        *[f"| {status} | {n:,} |" for status, n in result["statuses"].items()],
        "",
        "| case | answers |",
        "|---|---|",
        *[f"| {kind} | {answers} |" for kind, answers in result["by_case"].items()],
        "",
        f"Server faults (500-502): **{result['server_faults']}**; 504s: "
        f"{result['504_by_case'] or 'none'} (a body that never ends waits until the request "
        f"deadline); other 503/504: **{result['other_5xx']}**; "
        "error answers that are not JSON errors: "
        f"**{result['not_json_errors']}**; requests neither answered nor closed: "
        f"**{result['no_answer']}**.",
        "",
        "| check | |",
        "|---|---|",
        *[f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in result["checks"].items()],
        "",
    ]
    return "\n".join(lines)


def run_fuzz(
    requests: int, *, seed: int = 32, concurrency: int = 16, out: Path | None = None,
    command: str = "",
) -> dict[str, Any]:  # fmt: skip
    """The whole fuzz: the service in a thread, the requests, the report (written to
    ``out``)."""
    from crag_heuristic import CRAG
    from crag_heuristic.sample import sample_retriever
    from crag_heuristic.serve import ServeSettings, create_app, serving

    crag = CRAG(sample_retriever(), cache=False)
    settings = ServeSettings(request_timeout=1.0, header_timeout=1.0, max_k=20)
    started = time.monotonic()
    with serving(create_app(crag, settings)) as url:
        outcomes = asyncio.run(fuzz(url, requests, seed, concurrency))
    result = report(outcomes, seed=seed, command=command, seconds=time.monotonic() - started)
    crag.close()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "http_fuzz.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "http_fuzz.md").write_text(markdown(result))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    result = run_fuzz(
        args.requests, seed=args.seed, concurrency=args.concurrency, out=args.out,
        command=f"python benchmarks/http_fuzz.py {shown}".strip(),
    )  # fmt: skip
    print(markdown(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
