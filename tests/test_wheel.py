"""What the wheel holds: the package with its data (the synonym sets, the profiles, the sample),
which load from a real install, and no code that starts servers (the project's test kit that runs
Redis and SearXNG lives in tests/support)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what starts a process or serves a socket: a module importing one of these starts servers
SERVER_MODULES = frozenset({"subprocess", "http.server", "socketserver", "venv"})
SERVER_CALLS = frozenset(
    {
        ("asyncio", "create_subprocess_exec"),
        ("asyncio", "create_subprocess_shell"),
        ("os", "fork"),
        ("os", "posix_spawn"),
        ("os", "system"),
    }
)
SHIPPED = (
    "__init__.py",
    "README.md",
    "WORDNET_LICENSE.txt",
    "biomedical.txt",
    "english.txt",
    "finance.txt",
    "programming.txt",
)


def server_code(source: str) -> list[str]:
    """What in this module's source starts a process or a server (empty: nothing)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name in SERVER_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in SERVER_MODULES:
            found.append(node.module)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in SERVER_CALLS
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_shipped_packages_start_no_servers() -> None:
    """Every module of the packages setup.cfg ships (every package under crag_heuristic/,
    tests/test_packaging.py), read as source: the fast check."""
    packages = [init.parent for init in (ROOT / "crag_heuristic").rglob("__init__.py")]
    assert ROOT / "crag_heuristic" / "testing" in packages
    modules = [module for package in packages for module in package.glob("*.py")]
    assert len(modules) > 100
    offenders = {
        str(module.relative_to(ROOT)): found
        for module in modules
        if (found := server_code(module.read_text("utf-8")))
    }
    assert offenders == {}
    # and the check does see the test kit's servers
    kit = ROOT / "tests" / "support" / "crag_testkit"
    assert server_code((kit / "_redis.py").read_text("utf-8")) == ["subprocess"]
    assert "http.server" in server_code((kit / "_fixture_engine.py").read_text("utf-8"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a copy of the source tree (the tree itself stays clean)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    # the research and the benchmarks sit beside the package, as in the repository: the
    # wheel must leave them out on its own (setup.cfg's packages), not for want of them
    for folder in ("crag_heuristic", "research", "benchmarks"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    out = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(source), "-w", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("crag_heuristic-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_the_synonym_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        english = archive.read("crag_heuristic/synonyms/english.txt")
    for name in SHIPPED:
        assert f"crag_heuristic/synonyms/{name}" in names
    assert "crag_heuristic/_expansion/synonyms.py" in names
    assert english == (ROOT / "crag_heuristic" / "synonyms" / "english.txt").read_bytes()
    for data in (
        "py.typed",
        "_text/_native.pyi",  # the C extension's types (the extension itself when a compiler was there)
        "profiles/minilm-multi.toml",
        "profiles/minilm-scifact.toml",
        "profiles/shipped/minilm-multi.json",  # what a process builds the default from
        "profiles/shipped/minilm-scifact.json",
        "data/sample_documents.jsonl",
        "data/sample_queries.jsonl",
    ):
        assert f"crag_heuristic/{data}" in names


@pytest.mark.slow
def test_a_non_editable_install_finds_the_sets(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=600,
    )
    script = textwrap.dedent(
        """
        import crag_heuristic, crag_heuristic.sample, sys
        from importlib import resources
        from crag_heuristic.expansion import SynonymExpander, SynonymSet
        print(crag_heuristic.__file__)
        print(",".join(SynonymSet.bundled_names()))
        print(resources.files("crag_heuristic.synonyms").joinpath("english.txt").is_file())
        print(SynonymExpander(["biomedical"]).expand("heart attack").queries[1])
        print(crag_heuristic.Evaluator().config.name, len(crag_heuristic.sample.load_sample_corpus()),
              crag_heuristic._config._shipped("minilm-multi") is not None)
        """
    )
    # the target directory comes first on sys.path, ahead of the editable install
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    location, names, found, query, default = done.stdout.splitlines()
    assert Path(location).is_relative_to(target)
    assert names == "biomedical,english,finance,programming"
    assert found == "True"
    assert query == "myocardial infarction"
    assert (
        default == "minilm-multi 64 True"
    )  # the default profile (its JSON) and the sample ship too


@pytest.mark.slow
def test_the_wheel_holds_the_library_and_no_server_code(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        sources = {
            name: archive.read(name).decode("utf-8")
            for name in archive.namelist()
            if name.endswith(".py")
        }
    assert all(name.startswith("crag_heuristic/") for name in sources), sorted(sources)
    assert "crag_heuristic/testing/_fakes.py" in sources
    assert {name: found for name, source in sources.items() if (found := server_code(source))} == {}


@pytest.mark.slow
def test_the_wheel_holds_none_of_the_research(wheel: Path) -> None:
    """How the shipped default was chosen (research/: nested leave one collection out,
    the variants, the evidence probe, the route variants) ships in no wheel."""
    own = {path.name for path in (ROOT / "crag_heuristic").rglob("*.py")}
    research = {path.name for path in (ROOT / "research").glob("*.py")} - own
    assert {"loco.py", "selection.py", "variants.py", "evidence_probe.py"} <= research
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = [archive.read(name).decode("utf-8") for name in names if name.endswith(".py")]
    assert not [name for name in names if not name.startswith("crag_heuristic")]
    assert [name for name in names if name.rpartition("/")[2] in research] == []
    defined = {
        node.name
        for source in sources
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    entry_points = {"run_loco", "nested_loco", "run_self_calibration", "run_evidence_probe"}
    assert (entry_points | {"run_corrections", "run_variants", "FitCache"}).isdisjoint(defined)
