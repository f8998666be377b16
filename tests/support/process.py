"""A ``pdn`` command as a process of its own: started on a free port with a data directory of
its own, waited for until it answers, stopped with SIGTERM (as systemd stops it), its output
kept in a log file that every failure shows.

The kinds the tests start are in ``tests.support.display`` (``pdn display``) and
``tests.support.scheduler`` (``pdn scheduler``); ``pdn content`` and ``pdn sensor`` are this
class as it is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import requests

from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.waiting import wait_until

#: Variables of the developer's shell that would change what a process under test accepts.
CREDENTIALS = ("PDN_API_TOKEN", "PDN_API_URL", "PDN_DISPLAY_TOKEN", "PDN_DISPLAYS_FILE")
#: The ``pdn`` command of this checkout, whatever the venv's entry point says.
PDN_MODULE = (sys.executable, "-m", "server.cli")
#: The venv's ``pdn`` entry point, as a user runs it.
PDN = str(Path(sys.executable).parent / "pdn")


class PdnProcess:
    """``pdn <command> [args] --port <port>`` with its output in ``<folder>/<command>.log``.

    ``probe``: the path whose 200 says the process is up (``ready`` replaces that check);
    ``env``: set over this process's environment, less ``unset``; ``port``: a given one (the
    port of a process stopped before), or a free one; ``listen_flag``: False when the port is
    in the process's config file instead; ``program``: how ``pdn`` is run (this checkout's
    module, or ``(PDN,)``: the venv's entry point); ``cwd``: where; ``stdin``: a pipe that
    ``send`` writes to (a driver that takes commands).
    """

    def __init__(
        self,
        command: str,
        folder: Path,
        args: Sequence[str] = (),
        *,
        port: int | None = None,
        probe: str = "/",
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = CREDENTIALS,
        scheme: str = "http",
        listen_flag: bool = True,
        program: Sequence[str] = PDN_MODULE,
        cwd: Path = REPO,
        stdin: bool = False,
    ) -> None:
        self.command = command
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.probe = probe
        self.log = folder / f"{command}.log"
        self.env = {k: v for k, v in os.environ.items() if k not in set(unset)}
        self.env.update(env or {})
        self.argv = [*program, command, *args]
        if listen_flag:
            self.argv += ["--port", str(self.port)]
        self.cwd = cwd
        self.stdin = stdin
        self.process: subprocess.Popen[bytes] | None = None

    # -- life --------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start it (again, after a stop or a kill: same port, folder and log)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE if self.stdin else None,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, ready: Callable[[], bool] | None = None, timeout: float = 60) -> Self:
        """Until ``ready()`` (by default: ``probe`` answers 200); fails with the log if the
        process exits first or does not get there in ``timeout`` seconds."""
        check = ready or self.answers

        def up() -> bool:
            if not self.running:
                raise AssertionError(f"pdn {self.command} exited with {self.returncode}:\n"
                                     f"{self.text()}")  # fmt: skip
            return check()

        try:
            wait_until(up, timeout, lambda: f"pdn {self.command} up:\n{self.text()}", step=0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def answers(self) -> bool:
        """``probe`` answers 200 now (refused before it listens, slow while it starts)."""
        try:
            return requests.get(self.url + self.probe, timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM and its exit code; SIGKILL (and None) if it is still there ``timeout``
        seconds later, so a process that does not stop fails its own test, not the next."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdin is not None:
            self.process.stdin.close()
        return code

    def send(self, line: str) -> None:
        """Write ``line`` to its standard input (``stdin=True``)."""
        assert self.process is not None and self.process.stdin is not None, "no stdin pipe"
        self.process.stdin.write(line.encode())
        self.process.stdin.flush()

    def wait(self, timeout: float) -> int:
        """Its exit code, once it exits by itself (``subprocess.TimeoutExpired`` after
        ``timeout`` seconds)."""
        assert self.process is not None, "never started"
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown at all."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def text(self) -> str:
        """Everything the process wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self) -> Self:
        return self.start().wait_ready()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
