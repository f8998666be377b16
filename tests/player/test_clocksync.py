"""The clock's synchronisation as /x/health reports it (player/clocksync.py): chrony's and
timesyncd's words read as they print them, a missing tool reported as unknown, never guessed.

The chrony outputs below were printed by Debian's chronyc 4.3 against two chronyd -x (no
control of the clock) on loopback: a client of a local server, and one with no server to ask.
With chronyd and chronyc on PATH (or in $PDN_CHRONY_ROOT/usr/{s,}bin) the last test runs that
pair for real: a local NTP server for a wall, as docs/screen.md sets one up."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from player.clocksync import ClockState, ClockSync, parse_span, read_clock
from player.commands import CommandResult
from tests.support.waiting import wait_for_value, wait_until

SYNCHRONISED = """\
Reference ID    : 7F000001 (localhost)
Stratum         : 9
Ref time (UTC)  : Thu Nov 26 07:51:07 2026
System time     : 0.000001706 seconds fast of NTP time
Last offset     : +0.000000001 seconds
RMS offset      : 0.000000050 seconds
Frequency       : 0.017 ppm fast
Residual freq   : -0.000 ppm
Skew            : 0.159 ppm
Root delay      : 0.000006282 seconds
Root dispersion : 0.000001172 seconds
Update interval : 0.1 seconds
Leap status     : Normal
"""
NOT_SYNCHRONISED = """\
Reference ID    : 00000000 ()
Stratum         : 0
Ref time (UTC)  : Thu Jan 01 00:00:00 1970
System time     : 0.000000000 seconds fast of NTP time
Last offset     : +0.000000000 seconds
RMS offset      : 0.000000000 seconds
Frequency       : 0.000 ppm slow
Residual freq   : +0.000 ppm
Skew            : 0.000 ppm
Root delay      : 1.000000000 seconds
Root dispersion : 1.000000000 seconds
Update interval : 0.0 seconds
Leap status     : Not synchronised
"""
TIMESYNC_STATUS = """\
       Server: 192.168.1.10 (wall-ntp.local)
Poll interval: 34min 8s (min: 32s; max 34min 8s)
         Leap: normal
      Version: 4
      Stratum: 2
    Reference: C035676C
    Precision: 1us (-25)
Root distance: 1.234ms (max: 5s)
       Offset: -1.534ms
        Delay: 2.345ms
       Jitter: 345us
 Packet count: 12
    Frequency: -2.345ppm
"""


class Tools:
    """A fake CommandRunner: what each command answers; absent tools are not found."""

    def __init__(self, answers: dict[str, CommandResult], installed: set[str]) -> None:
        self.answers = answers
        self.installed = installed
        self.asked: list[list[str]] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.installed else None

    def __call__(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.asked.append(list(args))
        assert env is not None and env["LC_ALL"] == "C"  # parsed as C prints it
        return self.answers.get(" ".join(args), CommandResult(1, stderr="unexpected"))


def test_spans_as_systemd_prints_them() -> None:
    assert parse_span("-1.534ms") == pytest.approx(-0.001534)
    assert parse_span("+275us") == pytest.approx(0.000275)
    assert parse_span("1min 2.5s") == pytest.approx(62.5)
    assert parse_span("n/a") is None


def test_chrony_fast_slow_and_not_synchronised() -> None:
    tools = Tools({"chronyc tracking": CommandResult(0, SYNCHRONISED)}, {"chronyc"})
    state = read_clock(tools, tools.which)
    assert (state.source, state.synchronised, state.server, state.stratum) == (
        "chrony",
        True,
        "localhost",
        9,
    )
    assert state.offset == pytest.approx(1.706e-6)  # fast: ahead
    slow = SYNCHRONISED.replace("0.000001706 seconds fast", "0.002500000 seconds slow")
    tools.answers["chronyc tracking"] = CommandResult(0, slow)
    assert read_clock(tools, tools.which).offset == pytest.approx(-0.0025)
    tools.answers["chronyc tracking"] = CommandResult(0, NOT_SYNCHRONISED)
    state = read_clock(tools, tools.which)
    assert state.synchronised is False and state.server is None
    assert state.note == "leap status Not synchronised"


def test_timesyncd_when_chrony_does_not_answer() -> None:
    tools = Tools(
        {
            "chronyc tracking": CommandResult(1, stderr="506 Cannot talk to daemon"),
            "timedatectl show -p NTPSynchronized --value": CommandResult(0, "yes\n"),
            "timedatectl timesync-status": CommandResult(0, TIMESYNC_STATUS),
        },
        {"chronyc", "timedatectl"},
    )
    state = read_clock(tools, tools.which)
    assert (state.source, state.synchronised, state.stratum) == ("timesyncd", True, 2)
    assert state.server == "192.168.1.10 (wall-ntp.local)"
    # timesyncd's Offset is the server's time minus ours: ours is 1.534 ms ahead.
    assert state.offset == pytest.approx(0.001534)


def test_missing_or_silent_tools_are_unknown_not_guessed() -> None:
    nothing = Tools({}, set())
    state = read_clock(nothing, nothing.which)
    assert (state.source, state.synchronised, state.offset) == ("unknown", None, None)
    assert "chronyc is not installed" in state.note and "timedatectl is not installed" in state.note
    no_bus = Tools(
        {
            "timedatectl show -p NTPSynchronized --value": CommandResult(
                1, stderr="Failed to connect to bus: Host is down"
            )
        },
        {"timedatectl"},
    )
    state = read_clock(no_bus, no_bus.which)
    assert state.source == "unknown" and state.synchronised is None
    assert "Failed to connect to bus" in state.note
    no_status = Tools(
        {
            "timedatectl show -p NTPSynchronized --value": CommandResult(0, "no\n"),
            "timedatectl timesync-status": CommandResult(1, stderr="Unit not found"),
        },
        {"timedatectl"},
    )
    state = read_clock(no_status, no_status.which)
    assert (state.source, state.synchronised, state.offset) == ("timesyncd", False, None)


def test_health_answers_from_the_last_reading_on_its_own_thread() -> None:
    readings = iter([ClockState("chrony", True, 0.0042, "ntp", 3)])
    sync = ClockSync(read=lambda: next(readings), interval=3600)
    assert sync.status()["source"] == "unknown"  # before the first reading: not a guess
    sync.start()
    wait_until(lambda: sync.status()["source"] != "unknown", 5, "a first reading", step=0.01)
    sync.stop()
    status = sync.status()
    assert (status["source"], status["synchronised"], status["offset-ms"]) == ("chrony", True, 4.2)
    assert status["checked"] is not None


#: Where ``bash packaging/dev.sh test`` unpacks Debian's chrony (not installed: no time service).
CHRONY_ROOTS = (os.environ.get("PDN_CHRONY_ROOT"), str(Path(__file__).parents[2] / ".venv/chrony"))


def chrony_tool(name: str) -> str:
    for root in filter(None, CHRONY_ROOTS):
        for folder in ("usr/sbin", "usr/bin"):
            if (Path(root) / folder / name).exists():
                return str(Path(root) / folder / name)
    found = shutil.which(name)
    assert found, f"{name} is missing: bash packaging/dev.sh test unpacks Debian's chrony for it"
    return found


@pytest.fixture
def chrony_pair(tmp_path: Path) -> Iterator[Path]:
    """A local NTP server (chronyd, local stratum 8) and a display's chronyd following it,
    both with -x: neither touches this machine's clock. -U: as any user, not only root."""
    chronyd = chrony_tool("chronyd")
    sockets = tmp_path / "sock"
    sockets.mkdir(mode=0o700)
    port = 11000 + os.getpid() % 1000
    (tmp_path / "server.conf").write_text(
        f"port {port}\ncmdport 0\nlocal stratum 8\nallow 127.0.0.1\npidfile {tmp_path}/server.pid\n"
    )
    (tmp_path / "display.conf").write_text(
        f"server 127.0.0.1 port {port} iburst minpoll -4 maxpoll -4\nport 0\ncmdport 0\n"
        f"bindcmdaddress {sockets}/display.sock\npidfile {tmp_path}/display.pid\n"
    )
    started = [
        subprocess.Popen(
            [
                chronyd,
                "-x",
                "-d",
                "-U",
                "-u",
                pwd.getpwuid(os.geteuid()).pw_name,
                "-f",
                str(tmp_path / f"{name}.conf"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("server", "display")
    ]
    try:
        yield sockets / "display.sock"
    finally:
        for process in started:
            process.terminate()
            process.wait(10)


def test_a_real_chronyd_following_a_local_server(chrony_pair: Path) -> None:
    chronyc = chrony_tool("chronyc")
    state = wait_for_value(
        lambda: read_clock(chronyc=(chronyc, "-h", str(chrony_pair))),
        lambda state: bool(state.synchronised),
        30,
        "chronyd synchronised",
        step=0.5,
    )
    assert state.source == "chrony" and state.synchronised, state
    assert state.stratum == 9  # one below the local server's 8
    assert state.offset is not None and abs(state.offset) < 0.001
