"""The stop's deadline (player.stopdeadline) in a real process whose main thread is stuck: the
process ends with the status asked for, once its stores are closed, and not before."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from tests.support.paths import REPO

#: A process that arms a deadline of ``within`` s, says when its "stores" close, then hangs its
#: main thread in a call that never returns (as Qt's does on a display server that is gone).
PROGRAM = textwrap.dedent(
    """
    import sys, threading, time
    from player.stopdeadline import StopDeadline

    within, durable_after = float(sys.argv[1]), float(sys.argv[2])
    gone = sys.argv[3] == "gone"
    deadline = StopDeadline(
        lambda: 7, within=within, grace=0.5, server_gone=lambda: gone, gone_within=0.5
    )
    print("armed", flush=True)
    deadline.arm("the test's stop")
    deadline.arm("a second stop")  # the first counts
    if durable_after >= 0:
        threading.Timer(durable_after, deadline.durable).start()
    threading.Event().wait()
    """
)


def run(within: float, durable_after: float, server: str = "alive") -> tuple[int, float, str]:
    """The exit code, the seconds from the arming to the exit, and the process's stderr."""
    process = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(within), str(durable_after), server],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "armed\n"
    since = time.monotonic()
    try:
        _out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, time.monotonic() - since, err


def test_a_stuck_stop_ends_at_the_deadline_with_the_status_asked_for() -> None:
    code, seconds, err = run(within=1.0, durable_after=0.1)
    assert code == 7, err
    assert 0.9 <= seconds < 3.0, seconds
    # Where it was stuck is in the log: the main thread's wait.
    assert "still stopping" in err and "in wait" in err, err
    assert "still closing" not in err


def test_stores_still_closing_get_a_little_longer_then_the_process_ends_anyway() -> None:
    code, seconds, err = run(within=0.5, durable_after=0.8)
    assert code == 7, err
    assert 0.75 <= seconds < 3.0, seconds  # waited for the stores (0.8 s), not the full grace
    assert "still closing" not in err
    code, seconds, err = run(within=0.5, durable_after=-1)
    assert code == 7, err
    assert 0.95 <= seconds < 3.0, seconds  # the deadline, then the whole grace
    assert "the stores were still closing at the stop's deadline" in err, err


def test_with_the_display_server_gone_the_count_is_short() -> None:
    code, seconds, err = run(within=10.0, durable_after=0.1, server="gone")
    assert code == 7, err
    assert 0.45 <= seconds < 3.0, seconds  # gone_within (0.5 s), not the 10 s deadline
    assert "still stopping" in err, err
