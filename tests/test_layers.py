"""Dependencies point down: the parts below the router never import the evaluator.

Retrievers, expansion, web, cache and fusion know only the data model, the
input checks, the configuration and the text analyzer (README, Architecture).
Read from the source with ``ast``, so a lazy import inside a function counts.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "crag_heuristic"

BELOW_THE_EVALUATOR = [
    "_checks.py",
    "_types.py",
    "_config.py",
    "_evidence.py",
    "_signals.py",
    "_text",
    "_scores.py",
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


def _imports(tree: ast.AST, package: list[str]) -> set[tuple[str, str | None]]:
    """Every import in ``tree``, lazy and type-only ones included, as (module, name):
    ``import a.b`` is ``("a.b", None)``, ``from a import b`` is ``("a", "b")``, a relative
    import resolved from ``package`` (the importing module's package)."""
    found: set[tuple[str, str | None]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.update((module, alias.name) for alias in node.names)
    return found


def _imported(path: Path) -> set[str]:
    """The package's modules ``path`` imports, lazy and type-only imports included
    (``from . import x`` is module ``x``, not the package)."""
    modules = _module_names()
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = list(parts[:-1])
    name = ".".join(package if parts[-1] == "__init__" else parts)
    found: set[str] = set()
    for module, alias in _imports(ast.parse(path.read_text(encoding="utf-8")), package):
        if alias is None:
            dotted = module.split(".")
            while dotted and ".".join(dotted) not in modules:
                dotted.pop()
            if dotted:
                found.add(".".join(dotted))
        else:
            full = f"{module}.{alias}"
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


def _part(module: str) -> str:
    """The part of the package a module belongs to: its top-level module or
    private package (``crag_heuristic._router.flow`` -> ``_router``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module(module: str) -> str:
    return module


@pytest.mark.parametrize("unit", [_module, _part], ids=["modules", "parts"])
def test_no_import_circle(unit: Callable[[str], str]) -> None:
    """Every import, lazy and type-only ones too, points one way (farm-studio look),
    between modules and between the parts (top-level modules and packages): no part
    reaches back into one that imports it. The parts' order, bottom first, is the one
    CONTRIBUTING.md draws."""
    graph: dict[str, set[str]] = {}
    for name, path in _module_names().items():
        own = unit(name)
        graph.setdefault(own, set()).update(u for u in map(unit, _imported(path)) if u != own)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import circle between {unit.__name__[1:]}s: {' -> '.join(exc.args[1])}")


# -- the rooms by role: the runtime, the user's bench, the command line ----------------------

BENCH = {"_bench", "bench"}
"""The benchmark harness a user runs on a folder (``_bench/``) and its public face."""
DRIVERS = {"_cli", "__main__"}
"""The command line: it drives the runtime and the bench alike."""


def _role(part: str) -> str:
    return "bench" if part in BENCH else "driver" if part in DRIVERS else "runtime"


def test_nothing_at_runtime_imports_the_bench() -> None:
    """The runtime (the gate, the router, calibration, grading, the service ...) never
    imports the harness nor the command line; the harness never imports the command line
    (CONTRIBUTING.md, Architecture: the rooms by role)."""
    allowed = {"runtime": {"runtime"}, "bench": {"runtime", "bench"}}
    bad = []
    for name, path in _module_names().items():
        role = _role(_part(name))
        if role == "driver":
            continue
        bad += [f"{name} -> {m}" for m in _imported(path) if _role(_part(m)) not in allowed[role]]
    assert bad == []


def test_only_the_bench_face_imports_the_harness() -> None:
    """Outside ``_bench/`` only its public face imports it: the command line reaches the
    harness through ``crag_heuristic.bench``, as a user would."""
    bad = sorted(
        f"{name} -> {m}"
        for name, path in _module_names().items()
        if _part(name) != "_bench" and name != "crag_heuristic.bench"
        for m in _imported(path)
        if _part(m) == "_bench"
    )
    assert bad == []


def test_the_role_checks_see_a_runtime_module_that_imports_the_bench() -> None:
    source = "def f():\n    from .._bench.pipeline import prepare\n"
    imported = _imports(ast.parse(source), ["crag_heuristic", "_calibration"])
    assert ("crag_heuristic._bench.pipeline", "prepare") in imported
    assert _role(_part("crag_heuristic._bench.pipeline")) == "bench"
    assert _role(_part("crag_heuristic._calibration.gate")) == "runtime"
    assert _role(_part("crag_heuristic._cli.bench")) == "driver"


# -- benchmarks/ use public names only -------------------------------------------------------

BENCHMARKS = PACKAGE.parent / "benchmarks"
# Python inside a shell script: a ``python -c '...'`` argument or a here-document.
_PYTHON_C = re.compile(r"""python3?\s+(?:-\S+\s+)*-c\s+(?:'([^']*)'|"([^"]*)")""")
_HEREDOC = re.compile(r"""<<-?\s*(['"]?)(\w+)\1[^\n]*\n(.*?)\n\s*\2\s*$""", re.S | re.M)


def _python_sources(path: Path) -> list[str]:
    """The Python a benchmark file runs: the file itself, or a shell script's
    ``python -c`` strings and here-documents (those that parse as Python)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [text]
    pieces = [a or b for a, b in _PYTHON_C.findall(text)]
    pieces += [body for _, _, body in _HEREDOC.findall(text)]
    sources = []
    for piece in pieces:
        try:
            ast.parse(piece)
        except SyntaxError:
            continue
        sources.append(piece)
    return sources


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _private_imports(path: Path) -> list[str]:
    """The private ``crag_heuristic`` modules and names ``path`` imports."""
    bad = set()
    for source in _python_sources(path):
        for module, name in _imports(ast.parse(source), []):
            parts = module.split(".")
            if parts[0] != "crag_heuristic":
                continue
            if any(_is_private(p) for p in parts) or (name is not None and _is_private(name)):
                bad.add(module if name is None else f"{module}:{name}")
    return sorted(bad)


@pytest.mark.parametrize(
    "path",
    sorted([*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("*.sh")]),
    ids=lambda p: p.name,
)
def test_benchmarks_use_public_names_only(path: Path) -> None:
    """A benchmark script is a user of the library: what it needs is public
    (``crag_heuristic.bench`` runs whole benchmarks); the test kit is allowed."""
    assert _private_imports(path) == [], f"benchmarks/{path.name} imports private names"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a.py", "from crag_heuristic._bench.loco import run_loco\n"),
        ("b.py", "def f():\n    import crag_heuristic._text as t\n"),
        ("c.py", "from crag_heuristic.text import _TOKEN_RE\n"),
        ("d.sh", "python -c 'from crag_heuristic._cli import main; main()'\n"),
        ("e.sh", "cat > run.py <<'PY'\nfrom crag_heuristic import _config\nPY\npython run.py\n"),
    ],
)
def test_the_benchmark_check_sees_private_imports(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert _private_imports(path) != []
    path.write_text("import crag_testkit\nfrom crag_heuristic.bench import run_loco\n")
    assert _private_imports(path) == []


# -- each public face mirrors one private part -------------------------------------------------

# A face whose private part is not named after it (``x`` mirrors ``_x`` otherwise).
_HOME = {"events": "_router", "refinement": "_evaluator"}
# Every face may re-export the error tree and the seams (one module each, by design).
_SHARED = {"_exceptions", "_protocols"}
# The names that live in another part, and why (CONTRIBUTING.md, Architecture):
# ``grading.Cascade`` drives the router's own flow, with the router's context and cache
# calls (under ``_grading`` it would make grading import the router, a circle);
# ``grading.GraderUsage`` / ``Graded`` sit in ``_usage``, beneath the error tree, whose
# ``GraderError.usage`` names them; and the ``StatsEngine`` protocol sits beside its
# engines beneath the corpus statistics that ``_protocols`` imports.
# ``bench`` still offers the names of ``crag_heuristic.calibration`` that were public on it
# before calibration became a room of its own: re-exported from that face, not copied.
_ALSO = {"grading": {"_router", "_usage"}, "protocols": {"_text"}, "bench": {"calibration"}}
_FACES = sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("face", _FACES)
def test_each_public_face_mirrors_one_private_part(face: str) -> None:
    home = _HOME.get(face, f"_{face}")
    assert (PACKAGE / home).exists() or (PACKAGE / f"{home}.py").exists(), home
    parts = {_part(m) for m in _imported(PACKAGE / f"{face}.py")}
    assert parts - (_SHARED - {home}) - _ALSO.get(face, set()) == {home}
