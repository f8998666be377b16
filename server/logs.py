"""Logging, set up once per process.

Every subsystem logs to its own ``pdn.<subsystem>`` logger. Under systemd (journald reads
stderr and adds its own time stamps) lines carry no time and a syslog priority prefix, so
``journalctl -p warning`` works; in a terminal they carry a time stamp.
"""

from __future__ import annotations

import logging
import os
import sys

_SYSLOG_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


class _JournalFormatter(logging.Formatter):
    """``<6>pdn.engine: message``: journald strips the prefix and keeps it as the priority."""

    def format(self, record: logging.LogRecord) -> str:
        priority = _SYSLOG_PRIORITY.get(record.levelno, 6)
        return f"<{priority}>{super().format(record)}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record, not at set-up time, so
    a thread that logs after stderr was swapped (a test's capture ending) never hits a closed
    file."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def under_journald() -> bool:
    """True when stderr is connected to the journal (systemd sets JOURNAL_STREAM)."""
    stream = os.environ.get("JOURNAL_STREAM", "")
    if not stream:
        return False
    try:
        device, inode = (int(part) for part in stream.split(":"))
        stat = os.fstat(sys.stderr.fileno())
    except (ValueError, OSError):
        return False
    return (stat.st_dev, stat.st_ino) == (device, inode)


def setup_logging(verbosity: int = 0) -> None:
    """Configure the root logger: verbosity -1 quiet (warnings), 0 info, 1+ debug."""
    level = logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    handler = _StderrHandler()
    if under_journald():
        handler.setFormatter(_JournalFormatter("%(name)s: %(message)s"))
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries that chatter at INFO about every request or connection.
    for noisy in ("urllib3", "httpx", "httpcore", "waitress.queue", "werkzeug"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
