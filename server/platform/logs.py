"""Logging, set up once per process.

Every subsystem logs to its own ``pdn.<subsystem>`` logger. In a terminal lines carry a time
stamp. Under systemd (stderr connected to the journal) each record goes to journald whole, at its
priority, by the journal's native protocol (:class:`JournalHandler`): one datagram per record
on ``/run/systemd/journal/socket``, with ``MESSAGE`` (every line of it, a traceback included),
``PRIORITY`` and the logger, thread and source line as fields of their own. So
``journalctl -p warning`` shows a traceback with its message, as one entry.

Why the socket and not a ``<N>`` prefix on stderr: journald splits a stream at newlines into
separate entries and reads the prefix on each line only, so a traceback arrived as a warning
line followed by priority-6 lines that ``-p warning`` hid; prefixing every line would keep the
lines at the right priority but still as N unrelated entries (a ``journalctl -n 5`` shows half
a traceback, and other threads' lines interleave). The native protocol keeps a record one entry.
When the socket cannot take a record (no socket, a record too large for a datagram), that record
goes to stderr with the prefix on every line (:class:`_JournalFormatter`), so nothing is lost
and no line loses its priority.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import threading

_SYSLOG_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


JOURNAL_FORMAT = "%(name)s: %(message)s"
#: journald's native protocol socket (systemd.journal-fields(7), "Native Journal Protocol").
JOURNAL_SOCKET = "/run/systemd/journal/socket"


def syslog_priority(levelno: int) -> int:
    """The syslog priority of a logging level (a custom level takes the next standard one up)."""
    for level in sorted(_SYSLOG_PRIORITY):
        if levelno <= level:
            return _SYSLOG_PRIORITY[level]
    return 2


class _JournalFormatter(logging.Formatter):
    """``<6>pdn.engine: message`` on every line: journald strips the prefix of each line it reads
    from stderr and keeps it as that line's priority (a traceback's lines included)."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in super().format(record).split("\n"))


def journal_fields(fields: dict[str, str]) -> bytes:
    """One datagram of the native protocol: ``KEY=value`` lines, and for a value with a newline
    ``KEY``, a newline, its length as 64-bit little endian, the value and a newline."""
    parts: list[bytes] = []
    for key, value in fields.items():
        data = value.encode("utf-8", "replace")
        if b"\n" in data:
            parts.append(key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n")
        else:
            parts.append(key.encode() + b"=" + data + b"\n")
    return b"".join(parts)


class JournalHandler(logging.Handler):
    """Sends each record to journald whole, at its priority, by the native protocol; a record
    the socket does not take goes to ``fallback`` (stderr, a prefix on every line)."""

    def __init__(
        self,
        fallback: logging.Handler,
        *,
        path: str = JOURNAL_SOCKET,
        identifier: str = "pdn",
    ) -> None:
        super().__init__()
        self.fallback = fallback
        self.path = path
        self.identifier = identifier
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(True)
        self._send_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            fields = {
                "MESSAGE": message,
                "PRIORITY": str(syslog_priority(record.levelno)),
                "SYSLOG_IDENTIFIER": self.identifier,
                "LOGGER": record.name,
                "THREAD_NAME": record.threadName or "",
                "CODE_FILE": record.pathname,
                "CODE_LINE": str(record.lineno),
                "CODE_FUNC": record.funcName,
            }
            if record.exc_info and record.exc_info[0] is not None:
                fields["EXCEPTION"] = record.exc_info[0].__name__
            datagram = journal_fields(fields)
        except Exception:
            self.handleError(record)
            return
        try:
            with self._send_lock:
                self._socket.sendto(datagram, self.path)
        except OSError:
            # No journal socket here, or a record larger than a datagram: stderr, every line
            # at its priority.
            self.fallback.handle(record)

    def close(self) -> None:
        with self._send_lock:
            self._socket.close()
        super().close()


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
    handler: logging.Handler = _StderrHandler()
    if under_journald():
        handler.setFormatter(_JournalFormatter(JOURNAL_FORMAT))
        handler = JournalHandler(handler)
        handler.setFormatter(logging.Formatter(JOURNAL_FORMAT))
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
