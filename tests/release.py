"""The previous release of pdn, for the tests of upgrades, rollback and version skew (issue 25).

pdn 0.1.0 (commit 6288233, to be tagged v0.1.0) is committed as a wheel,
``tests/fixtures/release-0.1.0`` (its ``make.sh`` rebuilds it), so no test needs the tag or that
commit in the clone. :func:`release_venv` installs a wheel into a venv of its own that reuses
this checkout's dependencies (a ``.pth`` file to the dev venv's site-packages): nothing is
downloaded, and the venv's own ``pdn`` package shadows the checkout's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PREVIOUS_WHEEL = REPO / "tests/fixtures/release-0.1.0/pdn_display-0.1.0-py3-none-any.whl"
PREVIOUS_VERSION = "0.1.0"
#: This checkout's site-packages: what a release venv of the tests reuses.
SITE_PACKAGES = sysconfig.get_path("purelib")
#: The interpreter this checkout's venv was made from (a release venv must match its ABI).
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def release_env(**extra: str) -> dict[str, str]:
    """The environment for a process of a release venv: this checkout kept off its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def release_venv(directory: Path, wheel: Path) -> Path:
    """A venv in ``directory`` with ``wheel`` installed (no dependencies: this checkout's are
    reused); returns its python."""
    subprocess.run([BASE_PYTHON, "-m", "venv", str(directory)], check=True, timeout=120)
    python = directory / "bin/python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    Path(purelib, "pdn-reuse.pth").write_text(SITE_PACKAGES + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
        env=release_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
        cwd=directory,
    )
    return python


def run_release(
    python: Path, code: str, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with a release venv's python, outside this checkout (cwd /)."""
    return subprocess.run(
        [str(python), "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=release_env(),
        cwd="/",
    )
