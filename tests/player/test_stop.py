"""The display always stops: within 5 s of SIGTERM or SIGINT, also when its display server (a real
Xvfb, a real headless sway) is gone first, and as a terminal's Ctrl-C stops ``dev.sh display``.

After each stop its database is whole and the last play is in its play log.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.platform.exitcodes import EXIT_OK, EXIT_SCREEN_LOST
from tests.support.compositor import CompositorDisplay, sway
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer, one_page
from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.waiting import wait_until
from tests.support.xvfb import xvfb_server

pytestmark = [pytest.mark.qt, pytest.mark.slow]

#: What the issue asks of a stop, from the signal to the process gone.
STOP_WITHIN = 5.0


@pytest.fixture(scope="module")
def content() -> Iterator[PageServer]:
    with one_page() as server:
        yield server


def play_page(display: DisplayProcess, content: PageServer) -> int:
    """Request a page and wait until it plays; the sequence of its playback record."""
    item = {"content-item": content.url + "/stop-page", "preferred-duration": "2 minutes"}
    assert display.post("/schedule", json=item).json() == {"request-status": "scheduling"}
    record = display.wait_playback(lambda r: r["content-item"] == item["content-item"], 60)
    sequence: int = record["sequence"]
    return sequence


def stopped_within(display: DisplayProcess, since: float) -> int:
    """Its exit code; fails if it is still there ``STOP_WITHIN`` seconds after ``since``."""
    assert display.process is not None
    try:
        code = display.process.wait(max(0.0, since + STOP_WITHIN - time.monotonic()))
    except subprocess.TimeoutExpired:
        display.kill()
        raise AssertionError(
            f"still running {STOP_WITHIN} s after the stop:\n{display.text()}"
        ) from None
    return code


def assert_intact(data_dir: Path, sequence: int, content: PageServer) -> None:
    """The database is whole, and its play log ends with the play of ``sequence``."""
    with sqlite3.connect(data_dir / "display.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        last = db.execute("SELECT sequence, item FROM plays ORDER BY sequence DESC LIMIT 1")
        assert last.fetchone() == (sequence, content.url + "/stop-page")
    db.close()


def expected_code(display: DisplayProcess) -> int:
    """0 when the signal came first; 3 (screen lost) when it found the server gone first."""
    return EXIT_OK if "received SIG" in display.text() else EXIT_SCREEN_LOST


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_it_cleanly_within_5_s(
    tmp_path: Path, content: PageServer, signum: signal.Signals
) -> None:
    with xvfb_server(640, 360) as (x_display, _pid):
        display = DisplayProcess(tmp_path, env={"DISPLAY": x_display}).start().wait_ready()
        sequence = play_page(display, content)
        assert display.process is not None
        since = time.monotonic()
        display.process.send_signal(signum)
        assert stopped_within(display, since) == EXIT_OK, display.text()
    assert f"received {signum.name}" in display.text()
    assert_intact(display.data_dir, sequence, content)


@pytest.mark.parametrize(
    ("x_signal", "signum"),
    [
        (signal.SIGKILL, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGKILL, signal.SIGINT),
        (signal.SIGINT, signal.SIGINT),  # a terminal's Ctrl-C reaches both at once
    ],
    ids=["Xvfb-KILL-then-TERM", "Xvfb-TERM-then-TERM", "Xvfb-KILL-then-INT", "both-INT"],
)
def test_it_stops_within_5_s_with_its_x_server_gone_first(
    tmp_path: Path, content: PageServer, x_signal: signal.Signals, signum: signal.Signals
) -> None:
    with xvfb_server(640, 360) as (x_display, x_pid):
        display = DisplayProcess(tmp_path, env={"DISPLAY": x_display}).start().wait_ready()
        sequence = play_page(display, content)
        assert display.process is not None
        since = time.monotonic()
        os.kill(x_pid, x_signal)
        if display.running:
            display.process.send_signal(signum)
        code = stopped_within(display, since)
    assert code == expected_code(display), display.text()
    assert_intact(display.data_dir, sequence, content)


def test_it_stops_within_5_s_with_its_x_server_gone_and_no_signal(
    tmp_path: Path, content: PageServer
) -> None:
    """A lost X server is a lost screen: it exits 3 for systemd to start it again."""
    with xvfb_server(640, 360) as (x_display, x_pid):
        display = DisplayProcess(tmp_path, env={"DISPLAY": x_display}).start().wait_ready()
        sequence = play_page(display, content)
        since = time.monotonic()
        os.kill(x_pid, signal.SIGKILL)
        assert stopped_within(display, since) == EXIT_SCREEN_LOST, display.text()
    assert "the display server is gone" in display.text()
    assert_intact(display.data_dir, sequence, content)


def test_it_stops_within_5_s_with_its_wayland_compositor_gone_first(
    tmp_path: Path, content: PageServer
) -> None:
    with sway(640, 360) as compositor:
        display = CompositorDisplay(compositor, tmp_path)
        sequence = play_page(display, content)
        assert display.process is not None
        since = time.monotonic()
        os.killpg(compositor.process.pid, signal.SIGKILL)
        if display.running:
            display.process.send_signal(signal.SIGTERM)
        code = stopped_within(display, since)
    assert code == expected_code(display), display.text()
    assert_intact(display.data_dir, sequence, content)


def group_members(group: int) -> list[str]:
    """The processes of process group ``group``: pid and command line."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(f"{entry.name} {command}")
    return members


def test_ctrl_c_on_dev_sh_display_ends_every_process_of_its_group(
    content: PageServer,
) -> None:
    """``bash packaging/dev.sh display`` with no screen (it runs an Xvfb of its own), in a
    session of its own as a terminal's command is; SIGINT to the whole group, as Ctrl-C."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pdn-devsh-") as folder:
        data = Path(folder) / "data"
        log = Path(folder) / "dev.log"
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env["PDN_DATA_DIR"] = str(data)
        with log.open("wb") as out:
            shell = subprocess.Popen(
                ["bash", str(REPO / "packaging" / "dev.sh"), "display", "--port", str(port)],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        group = shell.pid
        try:
            display = DisplayProcess(Path(folder), port=port)  # its API, as a client sees it
            wait_until(
                lambda: shell.poll() is None and display.answers(),
                120,
                lambda: f"dev.sh display up:\n{log.read_text(errors='replace')}",
                step=0.2,
            )
            sequence = play_page(display, content)
            members = group_members(group)
            assert any("Xvfb" in m for m in members), members
            since = time.monotonic()
            os.killpg(group, signal.SIGINT)
            try:
                code = shell.wait(max(0.0, since + STOP_WITHIN - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"dev.sh display still running {STOP_WITHIN} s after Ctrl-C: "
                    f"{group_members(group)}\n{log.read_text(errors='replace')}"
                ) from None
            wait_until(
                lambda: not group_members(group),
                max(0.0, since + STOP_WITHIN - time.monotonic()),
                lambda: f"the group's processes gone: {group_members(group)}",
                step=0.05,
            )
        finally:
            if group_members(group):
                os.killpg(group, signal.SIGKILL)
            shell.wait(10)
        text = log.read_text(errors="replace")
        assert code == EXIT_OK, text
        assert "received SIGINT" in text
        assert_intact(data, sequence, content)
