"""Fixtures for the load tests: the benchmark module and a python with SearXNG.

The benchmark lives in ``benchmarks/load_faults.py`` (with its report half in
``benchmarks/load_faults_report.py``); it is imported from there, so the test
runs exactly the code the benchmark runs. SearXNG comes from the shared
``searxng_python`` fixture of tests/conftest.py.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

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
def serve_load() -> ModuleType:
    return import_benchmark("serve_load")


@pytest.fixture(scope="session")
def slow_clients() -> ModuleType:
    return import_benchmark("slow_clients")


@pytest.fixture(scope="session")
def http_fuzz() -> ModuleType:
    return import_benchmark("http_fuzz")
