"""A server in its own process for tests: started on a free loopback port, waited
for, stopped with its whole process group, its folder removed.

:class:`ServerProcess` is what :class:`~crag_testkit.SearxngServer` and
:class:`~crag_testkit.OpenAIServer` share; each says how to run itself
(:meth:`ServerProcess._command`) and how to tell that it answers
(:meth:`ServerProcess._answers`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TypeVar

from ._errors import HelperError

__all__ = ["ServerProcess", "free_port"]

_LOG_TAIL_CHARS = 3000
_Server = TypeVar("_Server", bound="ServerProcess")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (another process may take it: start
    retries on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """The life of a test server's process (subclasses fill in what it runs).

    :meth:`start` makes a temporary folder (the process's cwd, holding its
    output in ``server.log`` and whatever :meth:`_command` writes there),
    starts the command in its own process group, and waits until
    :meth:`_answers`; a port picked here is tried three times (a race for a
    free port). :meth:`stop` terminates the group (then kills it) and removes
    the folder. A context manager.

    Attributes:
        name: what the server is called in error messages.
        error: the :class:`HelperError` raised when it does not come up.
    """

    name = "the server"
    error: type[HelperError] = HelperError

    def __init__(self, *, port: int | None, startup_timeout: float) -> None:
        self.port = port
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None
        self._bound_port = 0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _command(self, port: int, folder: Path) -> tuple[list[str], dict[str, str]]:
        """The command line and environment that serve on ``port`` (``folder``:
        the process's own, for its files)."""
        raise NotImplementedError

    def _answers(self) -> bool:
        """Whether the server answers (an OSError counts as no)."""
        raise NotImplementedError

    def start(self: _Server) -> _Server:
        """Start the server and wait until it answers.

        Raises:
            HelperError: (:attr:`error`) it exited or did not answer within
                ``startup_timeout``; its output is in the message.
        """
        if self.running:
            return self
        tries = 1 if self.port is not None else 3
        for attempt in range(tries):
            try:
                self._launch(self.port if self.port is not None else free_port())
                return self
            except self.error:
                self.stop()
                if attempt == tries - 1:
                    raise
        return self  # pragma: no cover - the loop returns or raises

    def _launch(self, port: int) -> None:
        folder = Path(tempfile.mkdtemp(prefix="crag-server-"))
        self._folder = folder
        command, env = self._command(port, folder)
        log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed when the process ends
        try:
            self._process = subprocess.Popen(
                command,
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise self.error(f"cannot run {command[0]}: {exc}") from exc
        finally:
            log.close()
        self._bound_port = port
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise self.error(
                    f"{self.name} exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                if self._answers():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise self.error(
            f"{self.name} did not answer within {self.startup_timeout:g} s:\n{self.log_tail()}"
        )

    def log_tail(self) -> str:
        """The end of the server's output (for error messages)."""
        if self._folder is None:
            return ""
        try:
            text = (self._folder / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return text[-_LOG_TAIL_CHARS:]

    def stop(self) -> None:
        """Stop the server and its process group, then remove its folder."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._signal(process, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
                process.wait(timeout=10)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @staticmethod
    def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
        try:
            if os.name == "posix":
                os.killpg(process.pid, signum)  # its own session: only what we started
            else:  # pragma: no cover
                process.send_signal(signum)
        except ProcessLookupError:
            pass

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
