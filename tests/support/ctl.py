"""``pdn ctl`` as the operator runs it: the installed command in a process of its own, run to
its end (``pdn_ctl``) or read while it runs (``watching``: ``pdn ctl watch``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tests.support.process import PDN


def pdn_ctl(
    *args: str, env: Mapping[str, str] | None = None, unset: Iterable[str] = ()
) -> subprocess.CompletedProcess[str]:
    """``pdn ctl <args>`` with this process's environment less ``unset``, ``env`` set over
    it; its exit code and output (a minute at the most)."""
    dropped = set(unset)
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    environ.update(env or {})
    return subprocess.run(
        [PDN, "ctl", *args], capture_output=True, text=True, timeout=60, check=False, env=environ
    )


@contextlib.contextmanager
def watching(
    *args: str, env: Mapping[str, str] | None = None, text: bool = False
) -> Iterator[subprocess.Popen[Any]]:
    """``pdn ctl <args>`` running, its output and errors on pipes the test reads (as ``text``
    or bytes); killed at the end if it is still there, its pipes closed."""
    process = subprocess.Popen(
        [PDN, "ctl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
        env={**os.environ, **(env or {})},
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
