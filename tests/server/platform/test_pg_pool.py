"""The pool's checkout check (server/platform/pg.py): no round trip for a healthy idle
connection, and a connection the server closed (a restart, ``pg_terminate_backend``) is
replaced before use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from server.platform.pg import Connection, open_pool
from tests.support.factories import started_by


@pytest.fixture
def checked_pool(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], tuple[ConnectionPool[Connection], list[Any]]]]:
    """``checked_pool(size)``: a pool of ``size`` connections (closed at the end), and the
    connections its checkout check asked the server about (an empty query each)."""
    asked: list[Any] = []
    real = ConnectionPool.check_connection

    def counted(connection: Any) -> None:
        asked.append(connection)
        real(connection)

    monkeypatch.setattr(ConnectionPool, "check_connection", counted)

    def make(size: int) -> tuple[ConnectionPool[Connection], list[Any]]:
        return open_pool(postgres_url, name="test", min_size=size, max_size=size), asked

    yield from started_by(make, lambda made: made[0].close())


def test_a_healthy_checkout_asks_the_server_nothing(
    checked_pool: Callable[[int], tuple[ConnectionPool[Connection], list[Any]]],
) -> None:
    pool, asked = checked_pool(2)
    for _ in range(20):
        with pool.connection() as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    assert asked == []


def test_connections_the_server_closed_are_replaced_before_use(
    postgres_url: str,
    checked_pool: Callable[[int], tuple[ConnectionPool[Connection], list[Any]]],
) -> None:
    pool, asked = checked_pool(3)
    pool.wait(timeout=30)
    backends = set()
    held = [pool.getconn() for _ in range(3)]
    for connection in held:
        row = connection.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        backends.add(row[0])
    for connection in held:
        pool.putconn(connection)
    # What a restart does to every idle connection: the server ends its backend.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        for pid in backends:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    for _ in range(6):
        with pool.connection() as connection:
            row = connection.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None and row[0] not in backends
    assert len(asked) >= 3  # each closed one was asked once, then replaced
