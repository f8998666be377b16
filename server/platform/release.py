"""Which release of pdn runs here, for ``/x/health``.

``packaging/install.sh`` installs each version into ``/opt/pdn/releases/<version>-<hash>`` with
a venv of its own, and ``packaging/pdn-release`` switches ``/opt/pdn/current`` between them and
rolls a display back when a new release does not come up. It keeps its state in
``/var/lib/pdn-release/state`` (``key=value`` lines, replaced by an atomic rename; the
directory is root's, the file readable by all): here the
release this process runs from (its venv's directory), the one a rollback left
(``rolled-back-from``) and whether the release is still on trial.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "package_version", "release_status"]

#: pdn-release's state; PDN_RELEASE_STATE names another (tests).
STATE_FILE = Path("/var/lib/pdn-release/state")


def package_version() -> str:
    """The installed pdn-display's version, or ``unknown`` when run from a bare checkout."""
    try:
        return version("pdn-display")
    except PackageNotFoundError:
        return "unknown"


def _state(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    pairs = (line.partition("=") for line in text.splitlines())
    return {key: value for key, sep, value in pairs if sep and key}


def release_status(prefix: str | None = None, state_file: Path | None = None) -> dict[str, Any]:
    """``release`` of ``/x/health``: this process's release (``name``: None when it does not
    run from a release directory, e.g. a checkout's venv), its ``version``, the release a
    rollback switched away from (``rolled-back-from``, None when there was none since the last
    release that passed its trial) and whether this release is ``on-trial``."""
    venv = Path(prefix if prefix is not None else sys.prefix)
    name = (
        venv.parent.name if venv.name == "venv" and venv.parent.parent.name == "releases" else None
    )
    path = state_file or Path(os.environ.get("PDN_RELEASE_STATE") or STATE_FILE)
    state = _state(path)
    failed = state.get("rolled-back-from") or None
    return {
        "name": name,
        "version": package_version(),
        "rolled-back-from": failed,
        "rolled-back-because": state.get("reason") if failed else None,
        "on-trial": name is not None and state.get("trial") == name,
    }
