"""Logging under journald: a multi-line record (a traceback) arrives whole, at its priority."""

from __future__ import annotations

import io
import logging
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.platform.logs import (
    JOURNAL_FORMAT,
    JournalHandler,
    _JournalFormatter,
    journal_fields,
    syslog_priority,
)


def parse_datagram(data: bytes) -> dict[str, str]:
    """The native journal protocol, read back as journald reads it."""
    fields: dict[str, str] = {}
    position = 0
    while position < len(data):
        newline = data.index(b"\n", position)
        line = data[position:newline]
        if b"=" in line:
            key, value = line.split(b"=", 1)
            fields[key.decode()] = value.decode()
            position = newline + 1
        else:
            (length,) = struct.unpack("<Q", data[newline + 1 : newline + 9])
            start = newline + 9
            fields[line.decode()] = data[start : start + length].decode()
            assert data[start + length : start + length + 1] == b"\n"
            position = start + length + 1
    return fields


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[socket.socket]:
    """A datagram socket standing in for journald's."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(tmp_path / "journal.socket"))
    server.settimeout(5)
    yield server
    server.close()


def journal_logger(path: str, fallback: logging.Handler) -> tuple[logging.Logger, JournalHandler]:
    handler = JournalHandler(fallback, path=path, identifier="pdn-test")
    handler.setFormatter(logging.Formatter(JOURNAL_FORMAT))
    logger = logging.getLogger("pdn.test-journal")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, handler


def test_a_traceback_arrives_as_one_entry_at_its_priority(journal: socket.socket) -> None:
    fallback = logging.StreamHandler(io.StringIO())
    logger, handler = journal_logger(journal.getsockname(), fallback)
    try:
        try:
            raise RuntimeError("the renderer went away")
        except RuntimeError:
            logger.warning("render process crashed\nsecond line", exc_info=True)
        fields = parse_datagram(journal.recv(65536))
    finally:
        handler.close()
    assert fields["PRIORITY"] == "4"  # warning: journalctl -p warning shows all of it
    message = fields["MESSAGE"]
    assert message.startswith("pdn.test-journal: render process crashed\nsecond line\n")
    assert "Traceback (most recent call last):" in message
    assert message.rstrip().endswith("RuntimeError: the renderer went away")
    assert fields["SYSLOG_IDENTIFIER"] == "pdn-test"
    assert fields["LOGGER"] == "pdn.test-journal"
    assert fields["EXCEPTION"] == "RuntimeError"
    assert fields["CODE_FUNC"] == "test_a_traceback_arrives_as_one_entry_at_its_priority"


def test_without_the_socket_every_line_keeps_its_priority(tmp_path: Path) -> None:
    stream = io.StringIO()
    fallback = logging.StreamHandler(stream)
    fallback.setFormatter(_JournalFormatter(JOURNAL_FORMAT))
    logger, handler = journal_logger(str(tmp_path / "no-such.socket"), fallback)
    try:
        try:
            raise ValueError("bad")
        except ValueError:
            logger.error("failed", exc_info=True)
    finally:
        handler.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) > 3 and "Traceback" in lines[1]
    assert all(line.startswith("<3>") for line in lines), lines


def test_native_protocol_framing_and_priorities() -> None:
    assert journal_fields({"A": "one line"}) == b"A=one line\n"
    assert journal_fields({"B": "x\ny"}) == b"B\n" + struct.pack("<Q", 3) + b"x\ny\n"
    assert [syslog_priority(level) for level in (10, 20, 25, 30, 40, 50, 60)] == [
        7,
        6,
        4,
        4,
        3,
        2,
        2,
    ]
