"""Packaging guards: what setup.cfg ships matches what the source tree holds."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
