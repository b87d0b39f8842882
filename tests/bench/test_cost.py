"""run_cost refuses a limit that leaves nothing to time (typed), before reading the folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crag_heuristic._exceptions import InputError
from crag_heuristic.bench import run_cost


@pytest.mark.parametrize("limit", [0, -3, True, 2.5])
def test_a_limit_that_times_nothing_is_refused(limit: object, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="limit must be an integer >= 1"):
        run_cost(tmp_path, limit=limit)  # type: ignore[arg-type]


def test_a_limit_of_one_is_taken(tmp_path: Path) -> None:
    # past the limit check: the empty folder is what is refused now
    with pytest.raises(InputError, match="not in BEIR layout"):
        run_cost(tmp_path, limit=1)


def test_torch_runs_on_the_pinned_threads_and_gets_its_own_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost section pins torch's threads while it times and restores them after
    (a stand-in module: importing torch here would cost seconds of the suite)."""
    import sys
    import types

    from crag_heuristic._bench.cost import pinned_torch_threads

    stand_in = types.SimpleNamespace(threads=2)
    stand_in.get_num_threads = lambda: stand_in.threads
    stand_in.set_num_threads = lambda n: setattr(stand_in, "threads", n)
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    with pinned_torch_threads(1) as threads:
        assert threads == 1 and stand_in.threads == 1
    assert stand_in.threads == 2
    with pytest.raises(RuntimeError), pinned_torch_threads(1):
        raise RuntimeError("a failed timing")
    assert stand_in.threads == 2
    with pinned_torch_threads(None) as threads:
        assert threads is None and stand_in.threads == 2
    monkeypatch.delitem(sys.modules, "torch")
    with pinned_torch_threads(1) as threads:  # no torch loaded: nothing to pin
        assert threads is None


def test_the_background_load_runs_while_the_block_does_and_ends_with_it() -> None:
    """``background_load(n)``: n busy processes of the benchmark's own while the block runs
    (the report says so), killed when it ends; 0 starts none."""
    import os

    from crag_testkit import LOADS, background_load

    psutil = pytest.importorskip("psutil")
    me = psutil.Process(os.getpid())

    def busy() -> list[Any]:
        return [p for p in me.children() if "while True: pass" in " ".join(p.cmdline())]

    with background_load(2) as said:
        started = busy()
        assert len(started) == 2 and said["busy_processes"] == 2
        assert isinstance(said["load_average"], float)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in started)
    with background_load(0) as said:
        assert said["busy_processes"] == 0 and busy() == []
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="processes"), background_load(bad):  # type: ignore[arg-type]
            pass
    assert LOADS == (0, 4)
