"""The one way to import a package the core install leaves out.

The core install (numpy, structlog, PyStemmer, faiss-cpu) runs the gate, the
router and the bundled demo. Every other third-party package belongs to an
extra named after what it enables (``web``, ``llm``, ``redis``, ``calibrate``, ``bm25``,
``yaml``, ``metrics``, ``dask``, ``langchain``, ``llamaindex``, ``qdrant``,
``serve``, ``bench``; setup.cfg) and is imported where a feature first needs it, inside
:func:`requires`::

    with requires("redis", "RedisCache"):
        from redis import exceptions

A missing package then raises :class:`~crag_heuristic.MissingDependencyError`
(an ``ImportError``) naming the extra to install, instead of a bare
``ModuleNotFoundError`` from deep inside. The imports stay plain ``import``
statements, so type checkers see the real modules.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from ._exceptions import MissingDependencyError


@contextmanager
def requires(extra: str, feature: str) -> Iterator[None]:
    """Turn a missing third-party module imported in the block into an error naming ``extra``.

    Args:
        extra: the extra that installs what the block imports.
        feature: what needs it, for the message (``"RedisCache"``).

    Raises:
        MissingDependencyError: a module imported in the block is not installed.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]  # the package, not its submodule
        if not missing or missing == "crag_heuristic":
            raise  # a bug of ours, not a missing extra
        raise MissingDependencyError(missing, extra, feature) from error


def check_installed(extra: str, feature: str, *modules: str) -> None:
    """Fail now, naming ``extra``, when one of ``modules`` is not installed (a command's
    check before it starts a long run; nothing is imported).

    Raises:
        MissingDependencyError: the first module of ``modules`` that is missing.
    """
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a blocked or half-removed package
            found = False
        if not found:
            raise MissingDependencyError(module, extra, feature)
