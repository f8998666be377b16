"""Running small external commands (xset, cec-ctl, timedatectl) best effort, with a timeout.

Screen power and clock checks call tools that may be missing, slow or hung (a CEC bus with no
TV answering). They go through a :data:`CommandRunner` so tests inject a fake one for what cannot
run here, and so no caller ever waits longer than its timeout or sees an exception.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger("pdn.commands")


@dataclass(frozen=True)
class CommandResult:
    """What a command did. ``returncode`` is None when it could not run or timed out."""

    returncode: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """A short reason for a log line."""
        if self.returncode is None:
            return self.stderr or "did not run"
        detail = (self.stderr or self.stdout).strip().splitlines()
        return f"exit {self.returncode}" + (f": {detail[-1]}" if detail else "")


class CommandRunner(Protocol):
    """Runs one command; :func:`run_command` is the real one, tests pass a fake."""

    def __call__(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...


def run_command(
    args: Sequence[str],
    *,
    timeout: float,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run ``args`` without a shell; never raises, never waits longer than ``timeout``."""
    try:
        completed = subprocess.run(
            list(args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(None, stderr=f"timed out after {timeout:g} s")
    except OSError as error:
        return CommandResult(None, stderr=str(error))
    return CommandResult(completed.returncode, completed.stdout, completed.stderr)
