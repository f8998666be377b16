"""The systemd watchdog, end to end: a real ``pdn display`` (Qt WebEngine offscreen) with a fake
NOTIFY_SOCKET sends READY=1 once its first frame is up and WATCHDOG=1 periodically, from the GUI
thread: while that thread is blocked the pings stop (the API thread keeps answering), and they
resume after."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.notify import NotifyListener
from tests.support.paths import REPO
from tests.support.process import PdnProcess

# Runs the real display in this interpreter, and on "block SECONDS" from stdin puts a sleep on
# its GUI thread through the app's own GUI bridge (a queued Qt signal).
DRIVER = """
import sys, threading, time
import player.qtloop as qtloop

bridges = []
original_init = qtloop.GuiBridge.__init__

def capture(self, *args, **kwargs):
    original_init(self, *args, **kwargs)
    bridges.append(self)

qtloop.GuiBridge.__init__ = capture

def commands():
    for line in sys.stdin:
        word, seconds = line.split()
        if word == "block" and bridges:
            bridges[0].post(lambda s=float(seconds): time.sleep(s))

threading.Thread(target=commands, daemon=True).start()
from server.cli import main
sys.exit(main(sys.argv[1:]))
"""

WATCHDOG_USEC = 1_000_000  # pings every 0.5 s


@pytest.fixture
def display(notify_listener: NotifyListener, tmp_path: Path) -> Iterator[PdnProcess]:
    """``pdn display`` through the driver above, its notifications to ``notify_listener``."""
    env = {
        "NOTIFY_SOCKET": notify_listener.address,
        "WATCHDOG_USEC": str(WATCHDOG_USEC),
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
    }
    process = PdnProcess(
        "display",
        tmp_path,
        ["--host", "127.0.0.1", "--data-dir", str(tmp_path / "data")],
        env=env,
        unset=("WATCHDOG_PID",),
        program=(sys.executable, "-c", DRIVER),
        cwd=tmp_path,
        stdin=True,
    )
    try:
        yield process.start()
    finally:
        process.stop()


def pings_between(listener: NotifyListener, start: float, end: float) -> list[float]:
    return [
        at
        for at, text in listener.messages
        if "WATCHDOG=1" in text.split("\n") and start <= at < end
    ]


@pytest.mark.qt
def test_ready_then_watchdog_pings_that_stop_while_the_gui_thread_is_blocked(
    display: PdnProcess, notify_listener: NotifyListener
) -> None:
    ready = notify_listener.wait_for("READY=1", timeout=90)
    assert "STATUS=on screen" in ready
    # Steady pings at about WATCHDOG_USEC / 2.
    start = time.monotonic()
    while time.monotonic() - start < 2.2:
        notify_listener.receive(0.1)
    steady = pings_between(notify_listener, start, time.monotonic())
    assert len(steady) >= 3, notify_listener.messages

    # Block the GUI thread for 3 s: no pings, while the API (its own thread) still answers.
    display.send("block 3\n")
    blocked_at = time.monotonic()
    time.sleep(0.6)  # the queued call reaches the GUI thread, a ping may be in flight
    answer = requests.get(f"{display.url}/playback/", timeout=5)
    assert answer.status_code == 200
    while time.monotonic() - blocked_at < 5.0:
        notify_listener.receive(0.1)
    during = pings_between(notify_listener, blocked_at + 0.6, blocked_at + 2.9)
    assert during == [], "pings kept coming while the GUI thread was blocked"
    after = pings_between(notify_listener, blocked_at + 3.0, time.monotonic())
    assert after, "pings did not resume after the GUI thread was free again"

    display.stop(20)
    while notify_listener.receive(0.2) is not None:
        pass
    assert any("STOPPING=1" in text for _, text in notify_listener.messages)
