"""What the wheel holds: the package with its data (the synonym sets, the profiles, the sample),
which load from a real install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (
    "__init__.py",
    "README.md",
    "WORDNET_LICENSE.txt",
    "biomedical.txt",
    "english.txt",
    "finance.txt",
    "programming.txt",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a copy of the source tree (the tree itself stays clean)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "crag_heuristic", source / "crag_heuristic", ignore=ignore)
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
        "profiles/minilm-multi.toml",
        "profiles/minilm-scifact.toml",
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
        from crag_heuristic._expansion import SynonymExpander, SynonymSet
        print(crag_heuristic.__file__)
        print(",".join(SynonymSet.bundled_names()))
        print(resources.files("crag_heuristic.synonyms").joinpath("english.txt").is_file())
        print(SynonymExpander(["biomedical"]).expand("heart attack").queries[1])
        print(crag_heuristic.Evaluator().config.name, len(crag_heuristic.sample.load_sample_corpus()))
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
    assert default == "minilm-multi 64"  # the default profile and the sample ship too
