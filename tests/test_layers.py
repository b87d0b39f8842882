"""Dependencies point down: the parts below the router never import the evaluator.

Retrievers, expansion, web, cache and fusion know only the data model, the
input checks, the configuration and the text analyzer (README, Architecture).
Read from the source with ``ast``, so a lazy import inside a function counts.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "crag_heuristic"

BELOW_THE_EVALUATOR = [
    "_checks.py",
    "_types.py",
    "_config.py",
    "_evidence.py",
    "_signals.py",
    "_text.py",
    "_corpus.py",
    "_scores.py",
    "_fusion.py",
    "_retrievers",
    "_expansion",
    "_web",
    "_cache",
]


def _modules(entry: str) -> list[Path]:
    path = PACKAGE / entry
    return sorted(path.glob("*.py")) if path.is_dir() else [path]


@functools.cache
def _module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imported(path: Path) -> set[str]:
    """The package's modules ``path`` imports, lazy and type-only imports included
    (``from . import x`` is module ``x``, not the package)."""
    modules = _module_names()
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = list(parts[:-1])
    name = ".".join(package if parts[-1] == "__init__" else parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                dotted = alias.name.split(".")
                while dotted and ".".join(dotted) not in modules:
                    dotted.pop()
                if dotted:
                    found.add(".".join(dotted))
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                full = f"{module}.{alias.name}"
                found.add(full if full in modules else module)
    return {m for m in found if m in modules and m != name}


@pytest.mark.parametrize("entry", BELOW_THE_EVALUATOR)
def test_lower_layers_do_not_import_the_evaluator(entry: str) -> None:
    for path in _modules(entry):
        bad = sorted(n for n in _imported(path) if n.startswith("crag_heuristic._evaluator"))
        assert bad == [], f"{path.relative_to(PACKAGE)} imports {bad}"


def test_refinement_does_not_import_the_evaluator_module() -> None:
    imported = _imported(PACKAGE / "_evaluator" / "refine.py")
    assert not any(n.startswith("crag_heuristic._evaluator.evaluator") for n in imported)


def test_input_checks_live_beside_the_types() -> None:
    from crag_heuristic import _checks

    assert _checks.check_query("q") == "q"
    assert _checks.check_k(3) == 3


def test_no_import_circle_in_the_package() -> None:
    """Every import, lazy and type-only ones too, points one way (farm-studio look)."""
    graph = {name: _imported(path) for name, path in _module_names().items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import circle: {' -> '.join(exc.args[1])}")
