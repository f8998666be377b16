"""The display's time zone, as the system has it configured: one answer for the whole player.

The name comes from, in order: ``$TZ`` (a leading ``:`` dropped), ``/etc/timezone`` (Debian and
Raspberry Pi OS), then the ``/etc/localtime`` link; the first that names a zone
:mod:`zoneinfo` knows wins, and nothing valid means UTC.

The link is read one step (``readlink``), not resolved to its end (``realpath``): one step is
what ``timedatectl set-timezone`` writes and what ``timedatectl`` reports, so the display shows
the name its administrator chose (``Europe/Kiev`` stays ``Europe/Kiev`` where tzdata links it
to ``Europe/Kyiv``), and it still works where the zoneinfo directory itself sits behind a link.
The fully resolved path is only tried after it, for chains whose first step names no zone.

An unreadable or undecodable ``/etc/timezone`` is skipped like a missing one: a kiosk must start
and show something (in UTC at worst) rather than fail over a stray byte in a settings file.
"""

from __future__ import annotations

import contextlib
import os
import zoneinfo
from pathlib import Path

__all__ = ["LOCALTIME", "TIMEZONE_FILE", "system_timezone_name"]

TIMEZONE_FILE = Path("/etc/timezone")
LOCALTIME = Path("/etc/localtime")


def system_timezone_name() -> str:
    """The system's IANA time zone name (``TZ``, ``/etc/timezone``, ``/etc/localtime``), or
    ``"UTC"``; always a name :class:`zoneinfo.ZoneInfo` accepts."""
    for name in _candidates():
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            continue
        return name
    return "UTC"


def _candidates() -> list[str]:
    found: list[str] = []
    if os.environ.get("TZ"):
        found.append(os.environ["TZ"].lstrip(":"))
    with contextlib.suppress(OSError, UnicodeDecodeError):
        found.append(TIMEZONE_FILE.read_text(encoding="utf-8").strip())
    for target in (_link(LOCALTIME), os.path.realpath(LOCALTIME)):
        if target is not None and "zoneinfo/" in target:
            found.append(target.split("zoneinfo/", 1)[1])
    return found


def _link(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None
