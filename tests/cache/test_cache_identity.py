"""Every cache key carries what produced its value: no configuration is served
another's (issue 26).

Several routers share one real Redis namespace, each configured differently in
one respect that changes the value: the web searcher's instance, language,
safesearch or categories (real HTTP servers over sockets, answering by what
they are sent); the cascade's grader; the corpus statistics; the profile. Each
must compute its own value on its first query (no hit of another's entry) and
be served its own on the next.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    Chunk,
    Evaluator,
    EvaluatorConfig,
    RedisCache,
    ScoreKind,
    SearxngClient,
)
from crag_heuristic.grading import Escalation
from crag_heuristic.testing import ListRetriever
from crag_heuristic.text import CorpusStats

QUERY = "solar panel efficiency in winter"
CHUNKS = [
    Chunk(id=f"c{i}", text=text, score=0.3 - i * 0.05, score_kind=ScoreKind.COSINE)
    for i, text in enumerate(
        [
            "Solar panels lose efficiency when hot; winter sun is weaker but panels run cool.",
            "Wind turbines produce more power in winter storms.",
            "Panel efficiency depends on temperature and irradiance.",
        ]
    )
]


class _Instance(BaseHTTPRequestHandler):
    """A search API answering with one result that names what it was sent."""

    def do_POST(self) -> None:
        form = dict(parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        label = f"{self.server.server_address[1]}|{form.get('language')}|"  # type: ignore[index]
        label += f"{form.get('safesearch')}|{form.get('categories')}"
        result = {
            "url": f"https://example.org/{zlib.crc32(label.encode())}",
            "title": label,
            "content": QUERY,
        }
        body = json.dumps({"query": form["q"], "results": [result]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def instances() -> Iterator[list[str]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Instance) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    finally:
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join()


def never() -> Evaluator:
    config = EvaluatorConfig.from_profile("synapse")
    return Evaluator(config.replace(thresholds={"relevant": 1.0, "partial": 1.0}))


def entries(admin: redis.Redis, namespace: str, kind: str) -> int:
    return len(list(admin.scan_iter(match=f"{namespace}:*:{kind}:*")))


def test_web_results_of_other_instances_and_settings_are_never_served(
    instances: list[str], redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    a, b = instances
    clients = {
        "instance-a": SearxngClient(a),
        "instance-b": SearxngClient(b),
        "language-de": SearxngClient(a, language="de"),
        "safesearch-2": SearxngClient(a, safesearch=2),
        "categories-news": SearxngClient(a, categories=["news"]),
    }
    assert len({client.fingerprint for client in clients.values()}) == len(clients)
    routers = {
        name: CRAG(
            ListRetriever(CHUNKS),
            never(),
            web=client,
            cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
            config={"cache_evaluations": False},
        )
        for name, client in clients.items()
    }
    first = {name: crag.retrieve(QUERY) for name, crag in routers.items()}
    assert all(r.web_search_used and not r.web_cache_hit for r in first.values())
    titles = {name: r.chunks[0].metadata["title"] for name, r in first.items()}
    assert len(set(titles.values())) == len(clients)  # each instance answered by its settings
    assert entries(admin, namespace, "web") == len(clients)
    again = {name: crag.retrieve(QUERY) for name, crag in routers.items()}
    assert all(r.web_cache_hit for r in again.values())
    assert {name: r.chunks[0].metadata["title"] for name, r in again.items()} == titles
    for client in clients.values():
        client.close()


class _Grader:
    def __init__(self, name: str, grade: float) -> None:
        self.fingerprint = name
        self.value = grade
        self.asked = 0

    def grade(self, query: str, chunks: Any) -> list[float]:
        self.asked += len(chunks)
        return [self.value] * len(chunks)


def test_another_graders_answers_are_never_served(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    graders = [_Grader("model-a:v1", 0.95), _Grader("model-b:v1", 0.05)]
    routers = [
        CRAG(
            ListRetriever(CHUNKS),
            cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
            grader=grader,
            escalation=Escalation(band=(0.0, 1.0), budget=1.0),
            config={"cache_evaluations": False},
        )
        for grader in graders
    ]
    first = [crag.retrieve(QUERY) for crag in routers]
    assert [g.asked for g in graders] == [3, 3]
    assert [set(r.cascade.grades.values()) for r in first if r.cascade] == [{0.95}, {0.05}]
    assert entries(admin, namespace, "grade") == 6
    again = [crag.retrieve(QUERY) for crag in routers]
    assert [g.asked for g in graders] == [3, 3]
    assert [r.cascade.grades for r in again if r.cascade] == [
        r.cascade.grades for r in first if r.cascade
    ]


class _WithStats(ListRetriever):
    def __init__(self, chunks: list[Chunk], stats: CorpusStats) -> None:
        super().__init__(chunks)
        self.stats = stats

    def corpus_stats(self) -> CorpusStats:
        return self.stats


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_evaluations_under_other_statistics_or_profiles_are_never_served(
    redis_server: RedisServer, admin: redis.Redis, namespace: str, asynchronous: bool
) -> None:
    """The statistics' fingerprint is in the evaluation's key: without it, a router
    with other document frequencies (so other IDF weights, another score) would be
    served the first router's evaluation, well formed and of the same profile."""
    solar_everywhere = CorpusStats.from_texts([f"solar panel {i}" for i in range(50)])
    solar_rare = CorpusStats.from_texts(["solar panel"] + [f"wind turbine {i}" for i in range(49)])
    # a gate that reads the chunks' BM25 (the default's evidence covers every query term
    # here, whatever the document frequencies: the same score under both statistics)
    setups = {
        "stats-common": (_WithStats(CHUNKS, solar_everywhere), Evaluator("minilm-scifact")),
        "stats-rare": (_WithStats(CHUNKS, solar_rare), Evaluator("minilm-scifact")),
        "profile-synapse": (_WithStats(CHUNKS, solar_rare), Evaluator("synapse")),
    }
    fresh = {
        name: Evaluator(evaluator.config).evaluate(QUERY, CHUNKS, retriever.stats)
        for name, (retriever, evaluator) in setups.items()
    }
    assert len({round(e.score, 9) for e in fresh.values()}) == len(setups)  # they differ
    routers = {
        name: CRAG(
            retriever,
            evaluator,
            cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
        )
        for name, (retriever, evaluator) in setups.items()
    }

    def run(crag: CRAG) -> Any:
        import asyncio

        return asyncio.run(crag.aretrieve(QUERY)) if asynchronous else crag.retrieve(QUERY)

    for name, crag in routers.items():
        result = run(crag)
        assert not result.cache_hit, name
        assert result.initial_evaluation == fresh[name], name
    assert entries(admin, namespace, "eval") == len(setups)
    for name, crag in routers.items():
        result = run(crag)
        assert result.cache_hit and result.initial_evaluation == fresh[name], name
