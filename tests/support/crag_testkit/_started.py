"""A real server a test needs: started, or the test skipped (failed under CI)."""

from __future__ import annotations

import os
from typing import Protocol, TypeVar


class _Startable(Protocol):
    def start(self) -> object: ...


_S = TypeVar("_S", bound=_Startable)


def started_or_skip(server: _S, what: str, unavailable: type[Exception]) -> _S:
    """``server`` started; when it cannot start for want of ``unavailable`` (a package
    missing), the test is skipped saying why, except under CI (``CI`` set), where it
    fails. Any other failure to start is raised as it is."""
    import pytest  # the kit serves benchmark scripts too: pytest only where a test asks

    try:
        server.start()
    except unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{what} cannot start under CI: {exc}")
        pytest.skip(f"{what} cannot start: {exc}")
    return server
