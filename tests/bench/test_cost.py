"""run_cost refuses a limit that leaves nothing to time (typed), before reading the folder."""

from __future__ import annotations

from pathlib import Path

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
