"""Packaging guards: what setup.cfg ships matches what the source tree holds."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
MAX_CORE = 5


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


def test_the_packages_are_found_under_the_package_only() -> None:
    """Every package under crag_heuristic/ ships (data packages such as synonyms/ too);
    nothing beside it (tests/, benchmarks/, tools/) does."""
    setup = _setup_cfg()
    assert setup["options"]["packages"].strip() == "find:"
    assert "package_dir" not in setup["options"]
    include = setup["options.packages.find"]["include"].split()
    assert include == ["crag_heuristic", "crag_heuristic.*"]


def test_pyproject_only_declares_the_build_system() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert "[build-system]" in text
    assert "[project]" not in text and "[tool." not in text


def test_the_licence_is_one_spdx_identifier_without_a_classifier() -> None:
    """setuptools >= 77 warns on every build when a licence classifier sits beside
    the licence (three deprecation warnings per ``pip install .``)."""
    metadata = _setup_cfg()["metadata"]
    assert metadata["license"].strip() == "MIT"
    assert "License ::" not in metadata["classifiers"]


def test_a_clean_test_run_has_no_warnings() -> None:
    """Every warning is an error in the test run; exceptions are listed with a reason."""
    filters = [
        line.strip()
        for line in _setup_cfg()["tool:pytest"]["filterwarnings"].splitlines()
        if line.strip()
    ]
    assert filters[0] == "error"


def _requirements(text: str) -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def _core_closure() -> set[str]:
    """The core distributions and everything they need here (their markers evaluated)."""
    todo = _requirements(_setup_cfg()["options"]["install_requires"])
    found: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found or not (requirement.marker is None or requirement.marker.evaluate()):
            continue
        found.add(name)
        for line in metadata.requires(requirement.name) or ():
            needed = Requirement(line)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                todo.append(needed)
    return found


def test_the_core_install_is_small() -> None:
    core = _requirements(_setup_cfg()["options"]["install_requires"])
    assert len(core) <= MAX_CORE, [str(r) for r in core]
    assert {canonicalize_name(r.name) for r in core if r.marker is None} == {
        "numpy",
        "structlog",
        "pystemmer",
        "faiss-cpu",
    }


# Run in a fresh interpreter: the top-level modules it holds at exit (with their files) beyond
# what the bare interpreter holds (site, .pth hooks).
_AUDIT = """
import atexit, json, runpy, sys
before = set(sys.modules)
def report():
    tops = {name.split(".")[0] for name in set(sys.modules) - before}
    files = {top: getattr(sys.modules.get(top), "__file__", None) for top in sorted(tops)}
    print(json.dumps(files), file=sys.stderr)
atexit.register(report)
sys.argv = ["crag-heuristic", *ARGS]
if ARGS:
    runpy.run_module("crag_heuristic", run_name="__main__")
else:
    import crag_heuristic
"""


def _third_party_after(args: list[str]) -> dict[str, list[str]]:
    script = _AUDIT.replace("ARGS", repr(args))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stderr.strip().splitlines()[-1])
    owners = metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names) | {"crag_heuristic"}
    return {
        top: owners.get(top, ["<unknown>"])
        for top, file in files.items()
        if top not in stdlib and file is not None  # None: made by an extension, not imported
    }


def test_import_and_the_readme_demo_need_the_core_only() -> None:
    """``import crag_heuristic`` and the README's first command import third-party modules of
    the core distributions (and what they need) only, so ``pip install .`` runs the demo."""
    match = re.search(
        r"^pip install \. && crag-heuristic (.+)$", (ROOT / "README.md").read_text(), re.M
    )
    assert match, "the README's first command moved"
    allowed = _core_closure()
    for args in ([], shlex.split(match.group(1))):
        found = _third_party_after(args)
        outside = {
            top: owners
            for top, owners in found.items()
            if not {canonicalize_name(owner) for owner in owners} & allowed
        }
        assert outside == {}, (args, outside)
    assert {"numpy", "faiss", "Stemmer"} <= set(found)  # the demo did run its FAISS index
