"""Packaging guards: what setup.cfg ships matches what the source tree holds."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


def test_every_source_package_is_listed_in_setup_cfg() -> None:
    listed = set(_setup_cfg()["options"]["packages"].split())
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "crag_heuristic").rglob("__init__.py")
    }
    assert on_disk <= listed, f"add to setup.cfg [options] packages: {sorted(on_disk - listed)}"


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
