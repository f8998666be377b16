"""The previous release of pdn, for the tests of upgrades, rollback and version skew.

pdn 0.1.0 (commit 6288233, to be tagged v0.1.0) is committed as a wheel,
``tests/fixtures/release-0.1.0`` (its ``make.sh`` rebuilds it), so no test needs the tag or that
commit in the clone. :func:`release_venv` installs a wheel into a venv of its own that reuses
this checkout's dependencies (a ``.pth`` file to the dev venv's site-packages): nothing is
downloaded, and the venv's own ``pdn`` package shadows the checkout's.

What the package index gives the tests (the lock's pip for ``install.sh --wheelhouse``, the
lock's setuptools to build wheels with) is downloaded once a session into a wheelhouse
(:func:`make_wheelhouse`); wheels are built with that setuptools in one build venv
(:func:`build_venv`, :func:`build_wheel`) rather than in a new isolated one each.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREVIOUS_WHEEL = REPO / "tests/fixtures/release-0.1.0/pdn_display-0.1.0-py3-none-any.whl"
PREVIOUS_VERSION = "0.1.0"
#: This checkout's site-packages: what a release venv of the tests reuses.
SITE_PACKAGES = sysconfig.get_path("purelib")
#: The interpreter this checkout's venv was made from (a release venv must match its ABI).
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
#: The lock file, whose pip and setuptools the wheelhouse holds.
CONSTRAINTS = REPO / "constraints.txt"


def release_env(**extra: str) -> dict[str, str]:
    """The environment for a process of a release venv: this checkout kept off its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def pip(*args: str, timeout: float = 300) -> None:
    """This checkout's pip (``--python`` points it at another venv), outside this checkout."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=release_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
        cwd="/",
    )
    assert result.returncode == 0, f"pip {' '.join(args)}:\n{result.stderr[-3000:]}"


def bare_venv(directory: Path) -> Path:
    """A venv without pip of its own (this checkout's installs into it); returns its python."""
    subprocess.run(
        [BASE_PYTHON, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120
    )
    return directory / "bin/python"


def release_venv(directory: Path, wheel: Path) -> Path:
    """A venv in ``directory`` with ``wheel`` installed (no dependencies: this checkout's are
    reused); returns its python."""
    python = bare_venv(directory)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    Path(purelib, "pdn-reuse.pth").write_text(SITE_PACKAGES + "\n")
    pip("--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel))
    return python


def make_wheelhouse(directory: Path) -> Path:
    """The lock's pip and setuptools, downloaded into ``directory`` (the one download of a
    session): what ``install.sh --wheelhouse`` and :func:`build_venv` take."""
    pip("download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(directory),
        "-c", str(CONSTRAINTS), "pip", "setuptools")  # fmt: skip
    return directory


def build_venv(directory: Path, wheelhouse: Path) -> Path:
    """A venv with the lock's setuptools from ``wheelhouse``, to build wheels in; its python."""
    python = bare_venv(directory)
    pip("--python", str(python), "install", "-q", "--no-index", "--find-links", str(wheelhouse),
        "-c", str(CONSTRAINTS), "setuptools")  # fmt: skip
    return python


def build_wheel(source: Path, out: Path, builder: Path) -> Path:
    """The wheel of the project in ``source``, built in ``out`` with the setuptools of the
    build venv whose python is ``builder``."""
    pip("--python", str(builder), "wheel", "-q", "--no-deps", "--no-build-isolation",
        "--no-index", "-w", str(out), str(source))  # fmt: skip
    (wheel,) = out.glob("pdn_display-*.whl")
    return wheel


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
