"""A real PostgreSQL for the tests and benchmarks: Debian's package (packaging/dev.sh installs
``postgresql``), started by ``initdb`` and ``pg_ctl`` in a temporary directory as an
unprivileged user, on 127.0.0.1 and a free port, and stopped at the end.

PostgreSQL refuses to run as root: as root the binaries run through ``runuser -u nobody`` in a
directory ``nobody`` owns (any unprivileged user works: ``PDN_TEST_PG_USER``). As anyone else
they run as that user.

Usage (the ``postgres_server`` fixture in tests/conftest.py does this once per session, and
``postgres_url`` gives each test a database of its own)::

    server = PgServer.start()
    url = server.create_database("t1")   # postgresql://pdn@127.0.0.1:PORT/t1
    ...
    server.stop()

Durability is off (``fsync=off``): a test database does not survive a power cut, and need not.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

__all__ = ["PgServer", "PostgresMissingError", "find_bin"]

ROLE = "pdn"


class PostgresMissingError(RuntimeError):
    """No PostgreSQL server binaries on this machine (apt-get install postgresql)."""


def find_bin() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and pg_ctl (or $PG_BIN)."""
    configured = os.environ.get("PG_BIN")
    candidates = [configured] if configured else []
    found = glob.glob("/usr/lib/postgresql/*/bin")
    found.sort(
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0
    )
    candidates += reversed(found)
    for candidate in candidates:
        if (
            candidate
            and (Path(candidate) / "initdb").exists()
            and (Path(candidate) / "pg_ctl").exists()
        ):
            return Path(candidate)
    raise PostgresMissingError(
        "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: bash packaging/dev.sh setup"
        " (or apt-get install postgresql)"
    )


@dataclass
class PgServer:
    bin: Path
    directory: Path
    port: int
    user: str | None  # the user the server runs as (None: this process's own)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, *, max_connections: int = 400) -> PgServer:
        binaries = find_bin()
        user: str | None = None
        directory = Path(tempfile.mkdtemp(prefix="pdn-pg-"))
        if os.geteuid() == 0:
            user = os.environ.get("PDN_TEST_PG_USER", "nobody")
            shutil.chown(directory, user)
        server = cls(binaries, directory, free_port(), user)
        try:
            server._run(
                "initdb", "-D", str(server.data), "-U", ROLE, "--auth=trust", "-E", "UTF8",
                "--locale=C", "--no-sync",
            )  # fmt: skip
            options = " ".join(
                (
                    f"-p {server.port}",
                    "-c listen_addresses=127.0.0.1",
                    f"-c unix_socket_directories={directory}",
                    f"-c max_connections={max_connections}",
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                )
            )
            server._run(
                "pg_ctl", "-D", str(server.data), "-o", options, "-l",
                str(directory / "server.log"), "-w", "-t", "60", "start",
            )  # fmt: skip
        except BaseException:
            server._remove()
            raise
        return server

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(
            command, cwd=self.directory, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{done.stdout}\n{tail}"
            )

    def sql(self, statement: str, database: str = "postgres") -> None:
        """Run one statement in autocommit (CREATE DATABASE cannot run in a transaction)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as connection:
            connection.execute(statement.encode())

    def create_database(self, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"not a database name: {name!r}")
        with self._lock:
            self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            self.sql(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        with self._lock, contextlib.suppress(Exception):
            self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self._remove()

    def _remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


if __name__ == "__main__":  # a server for trying things by hand: python -m tests.support.pgserver
    import time

    running = PgServer.start()
    print(running.url(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        running.stop()
