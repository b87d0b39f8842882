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
