"""The public API is pinned: a change here is a change users see.

The top level holds the core (the data model, the errors, the evaluator, the
configuration, the router, the retrievers, the caches, the web client and the
seams they plug into); each area's full set of names lives in its own public
submodule with its own sorted ``__all__``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import crag_heuristic

SNAPSHOT = Path(__file__).with_name("public_api.json")
"""Every public module's ``__all__`` as released: the one list the pins read.
``python tests/test_public_api.py --write`` writes the live API over it (review the diff)."""

FACES_WITH_EXTRAS = tuple(sorted(crag_heuristic._FACES_WITH_EXTRAS))
"""Public packages whose submodules are faces too (each needs its framework's extra)."""


def live_api() -> dict[str, list[str]]:
    """``{module: __all__}`` for the package and every public module in it (names without
    a leading underscore, found by walking the package, not typed here)."""
    names = ["crag_heuristic"]
    for info in pkgutil.iter_modules(crag_heuristic.__path__, "crag_heuristic."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            names.append(info.name)
    for package in FACES_WITH_EXTRAS:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__, f"{package}."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                names.append(info.name)
    # a data package (synonyms) has no __all__: pinned as no names
    return {
        name: list(getattr(importlib.import_module(name), "__all__", [])) for name in sorted(names)
    }


PINNED: dict[str, list[str]] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
EXPECTED = PINNED.get("crag_heuristic", [])
SUBMODULES = {name: names for name, names in PINNED.items() if name != "crag_heuristic"}


def test_the_snapshot_is_the_live_api() -> None:
    """A public name added, removed or moved is a change users see: it shows in the
    snapshot's diff (write it with ``python tests/test_public_api.py --write``)."""
    assert live_api() == PINNED


# 49 in 0.2's smaller front door; + the result's typed failures (Failure, FailureStage,
# WebOutcome, ParentLookupError) and MissingDependencyError (issue 20: extras)
MAX_TOP_LEVEL_NAMES = 55


def test_all_is_pinned_and_sorted() -> None:
    assert crag_heuristic.__all__ == EXPECTED
    assert crag_heuristic.__all__ == sorted(crag_heuristic.__all__)
    assert len(crag_heuristic.__all__) <= MAX_TOP_LEVEL_NAMES


def test_every_name_resolves() -> None:
    for name in crag_heuristic.__all__:
        assert getattr(crag_heuristic, name) is not None


@pytest.mark.parametrize("module_name", sorted(SUBMODULES))
def test_submodule_all_is_pinned_sorted_and_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [])
    assert names == SUBMODULES[module_name]
    assert names == sorted(names)
    for name in names:
        assert getattr(module, name) is not None
        if name in crag_heuristic.__all__:  # one object, two doors
            assert getattr(crag_heuristic, name) is getattr(module, name)


def test_every_error_is_a_crag_error() -> None:
    for name in crag_heuristic.__all__:
        obj = getattr(crag_heuristic, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, crag_heuristic.CragError), name


def test_a_name_that_is_not_top_level_says_where_it_lives() -> None:
    """Every face's name that is not at the top level (37 of them were in 0.2): the
    error names the first face, by module name, that has it."""
    homes: dict[str, str] = {}
    for module_name, names in sorted(SUBMODULES.items()):
        if module_name.startswith(FACES_WITH_EXTRAS):
            continue
        for name in names:
            homes.setdefault(name, module_name)
    elsewhere = {name: home for name, home in homes.items() if name not in EXPECTED}
    assert len(elsewhere) >= 37
    for name, module_name in elsewhere.items():
        with pytest.raises(AttributeError, match=rf"from {module_name} import {name}$"):
            getattr(crag_heuristic, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        crag_heuristic.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute '_Thresholds'"):
        crag_heuristic._Thresholds  # noqa: B018


def test_verdict_aliases_stay_aliases() -> None:
    verdict = crag_heuristic.Verdict
    assert verdict.CORRECT is verdict.RELEVANT
    assert verdict.AMBIGUOUS is verdict.PARTIAL
    assert verdict.INCORRECT is verdict.IRRELEVANT
    assert [v.name for v in verdict] == ["RELEVANT", "PARTIAL", "IRRELEVANT"]


def test_import_leaves_out_the_benchmark_harness_and_scikit_learn() -> None:
    code = (
        "import sys, crag_heuristic\n"
        # a failed look-up (hasattr probes) or a name that lives in a face loads nothing more
        "hasattr(crag_heuristic, 'no_such_name'), hasattr(crag_heuristic, 'Thresholds')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sklearn', 'matplotlib', 'torch', 'scipy', 'pytrec_eval') "
        "or m.startswith(('crag_heuristic._bench', 'crag_heuristic._calibration')))\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == ""
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not {m for m in imported if m.split(".")[0] == "sklearn"}
    assert not {
        m
        for m in imported
        if m.startswith(("crag_heuristic._bench", "crag_heuristic._calibration"))
    }


def test_the_grader_errors_are_crag_errors() -> None:
    from crag_heuristic import grading

    for name in ("GraderError", "GraderOutputError", "GraderTimeout"):
        assert issubclass(getattr(grading, name), crag_heuristic.CragError), name
    assert issubclass(grading.GraderTimeout, grading.GraderError)


def test_the_testing_helpers_are_the_light_ones() -> None:
    """``crag_heuristic.testing``: sorted, every name resolves, none of the server kit's."""
    import crag_testkit

    from crag_heuristic import testing

    assert testing.__all__ == sorted(testing.__all__)
    assert all(getattr(testing, name) is not None for name in testing.__all__)
    assert not set(testing.__all__) & set(crag_testkit.__all__)
    assert {"ListRetriever", "RecordingWebSearcher", "capture_events"} <= set(testing.__all__)


def test_py_typed_marker_is_shipped() -> None:
    from importlib import resources

    assert (resources.files("crag_heuristic") / "py.typed").is_file()


if __name__ == "__main__":  # python tests/test_public_api.py --write
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_public_api.py --write")
    SNAPSHOT.write_text(json.dumps(live_api(), indent=1) + "\n", encoding="utf-8")
