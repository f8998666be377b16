"""``pdn ctl`` as the operator runs it: the installed command in a process of its own, run to
its end, its output read as text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

#: The ``pdn`` command of this checkout's virtual environment.
PDN = str(Path(sys.executable).parent / "pdn")


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
