"""The frameworks stay out of the core: not imported by ``import crag_heuristic``,
not required by the core install, all in the ``test`` extra (CI installs only that)."""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("langchain_core", "langchain_community", "langgraph", "llama_index", "qdrant_client")


def _loaded_after(statement: str) -> list[str]:
    code = (
        f"import json, sys; {statement}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    return sorted(loaded & set(FRAMEWORKS))


@pytest.mark.parametrize(
    "statement",
    [
        "import crag_heuristic",
        "import crag_heuristic.integrations",
        "import crag_heuristic.retrievers",
    ],
)
def test_importing_the_library_imports_no_framework(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_each_integration_imports_only_its_framework() -> None:
    assert _loaded_after("import crag_heuristic.integrations.qdrant") == ["qdrant_client"]
    assert _loaded_after("from crag_heuristic.retrievers import QdrantRetriever") == [
        "qdrant_client"
    ]


def test_the_old_import_paths_give_the_retrievers_of_the_face() -> None:
    from crag_heuristic import FaissRetriever, retrievers
    from crag_heuristic.integrations import langchain, qdrant

    assert qdrant.QdrantRetriever is retrievers.QdrantRetriever
    assert qdrant.QdrantScores is retrievers.QdrantScores
    assert langchain.LangChainRetriever is retrievers.LangChainRetriever
    assert FaissRetriever is retrievers.FaissRetriever
    assert "QdrantRetriever" in dir(retrievers)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchRetriever'"):
        retrievers.NoSuchRetriever  # noqa: B018
    assert _loaded_after("import crag_heuristic.integrations.langchain") == ["langchain_core"]
    assert "qdrant_client" not in _loaded_after("import crag_heuristic.integrations.llamaindex")


def _requirements(text: str) -> dict[str, str]:
    names = {}
    for line in text.strip().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith("#"):
            name = line.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip()
            names[name.lower()] = line
    return names


def _resolved(extras: configparser.SectionProxy, extra: str) -> dict[str, str]:
    """An extra's requirements, with the extras it names (``crag-heuristic[a,b]``) expanded."""
    out = {}
    for name, requirement in _requirements(extras[extra]).items():
        if name == "crag-heuristic":
            for inner in requirement.split("[")[1].rstrip("]").split(","):
                out.update(_resolved(extras, inner.strip()))
        else:
            out[name] = requirement
    return out


def test_extras_are_bounded_and_in_the_test_extra() -> None:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    extras = parser["options.extras_require"]
    core = _requirements(parser["options"]["install_requires"])
    test = _resolved(extras, "test")
    for extra in ("langchain", "llamaindex", "qdrant"):
        for name, requirement in _requirements(extras[extra]).items():
            assert "<" in requirement, f"{requirement}: give the major version an upper bound"
            assert name not in core, f"{name} must stay out of the core install"
            assert test.get(name) == requirement, f"the test extra must hold {requirement}"
    # every extra is in "all", and the test extra installs "all"
    assert set(extras) - {"all", "test"} == set(
        extras["all"].split("[")[1].split("]")[0].split(",")
    )
    assert "crag-heuristic[all]" in extras["test"].split()
