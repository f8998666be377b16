"""Crash-only recovery of the display process: the restart back-off and a quiet log.

When the screen cannot be brought back in this process (the web engine is lost), the display
exits non-zero and systemd starts a new one (``Restart=always``). Each such exit is noted in
the data directory; a process that starts after several of them in a row waits a little
longer each time before it opens its window (:func:`restart_delay`), so a fault that comes
straight back costs a restart every minute at most, not a hot loop, and stays under the
unit's start limit. A display that then runs with a right screen for a while forgets them
(:func:`clear_exits`).

(:class:`server.platform.logrepeat.RepeatFilter` keeps a repeating message from flooding the
journal.)
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("pdn.app")

EXITS_FILE = "renderer-exits.json"
EXIT_MEMORY = 600.0  # seconds an exit is remembered for the back-off
FIRST_DELAY = 5.0
MAX_DELAY = 60.0  # under the unit's TimeoutStartSec (120 s), with start-up on top


def _read(path: Path) -> list[float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [float(t) for t in data if isinstance(t, int | float)]


def note_exit(data_dir: Path, now: float | None = None) -> None:
    """Remember that the display exits because its screen could not be brought back."""
    now = time.time() if now is None else now
    path = data_dir / EXITS_FILE
    recent = [t for t in _read(path) if now - EXIT_MEMORY < t <= now] + [now]
    try:
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(recent[-20:]))
        os.replace(temporary, path)
    except OSError as error:
        log.warning("cannot note the exit in %s: %s", path, error)


def restart_delay(data_dir: Path, now: float | None = None) -> float:
    """Seconds to wait before starting again: 0 after one recent exit, then 5, 10, 20 ... 60."""
    now = time.time() if now is None else now
    recent = [t for t in _read(data_dir / EXITS_FILE) if now - EXIT_MEMORY < t <= now]
    if len(recent) < 2:
        return 0.0
    return float(min(MAX_DELAY, FIRST_DELAY * 2.0 ** (len(recent) - 2)))


def clear_exits(data_dir: Path) -> None:
    """The screen has been right for a while: start the back-off afresh next time."""
    try:
        (data_dir / EXITS_FILE).unlink(missing_ok=True)
    except OSError as error:
        log.warning("cannot clear %s: %s", data_dir / EXITS_FILE, error)
