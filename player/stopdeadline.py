"""The display's last line of defence at stop: once asked to stop, the process is gone within
a deadline, whatever Qt is blocked in.

A stop that Qt blocks (a window that waits for a render thread stuck on a display server that
is gone, Qt WebEngine's teardown) would otherwise keep the process for good: systemd's stop would
end in SIGKILL after its own timeout, and a terminal's Ctrl-C would do nothing. The deadline runs
on a thread of its own, so it fires while the main thread is stuck in C++.

What must survive is written before it fires: the stop sequence closes the stores (the playback
record, the request queue, the databases) before anything that talks to the screen, and tells
the deadline so (:meth:`StopDeadline.durable`). A deadline that comes while the stores are still
closing gives them a little longer, then exits anyway: every write SQLite committed is kept by
its journal, and a hard exit never leaves a half-renamed file.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("pdn.app")

#: From the stop request to the hard exit: inside the 5 s a stop may take.
STOP_WITHIN = 3.5
#: How much longer stores still closing at the deadline are given.
DURABLE_GRACE = 0.5
#: With the display server gone, the main thread is likely stuck behind Qt's render thread and
#: the stop cannot go on: the count is this short (a stop closes its stores in 0.2-0.3 s).
GONE_WITHIN = 1.5
#: The backstop's count: Python's own threads cannot run while the main thread is stuck in C++
#: holding the interpreter's lock, so faulthandler's thread (C, no lock needed) then dumps the
#: stacks and ends the process with status 1.
BACKSTOP_WITHIN = 4.5


class StopDeadline:
    """Ends the process with ``status()`` if it is still there ``within`` seconds after
    :meth:`arm` (the first call counts; any thread may call it), or ``gone_within`` seconds
    after it when ``server_gone()`` says the display server is gone."""

    def __init__(
        self,
        status: Callable[[], int],
        *,
        within: float = STOP_WITHIN,
        grace: float = DURABLE_GRACE,
        server_gone: Callable[[], bool] = lambda: False,
        gone_within: float = GONE_WITHIN,
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        self._status = status
        self._within = within
        self._grace = grace
        self._server_gone = server_gone
        self._gone_within = gone_within
        self._exit_now = exit_now
        self._armed = threading.Lock()
        self._durable = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, why: str) -> None:
        """Start the count (once): the process is asked to stop, for ``why``."""
        if not self._armed.acquire(blocking=False):
            return
        self._thread = threading.Thread(
            target=self._run, args=(why, time.monotonic()), name="stop-deadline", daemon=True
        )
        self._thread.start()
        faulthandler.dump_traceback_later(
            max(BACKSTOP_WITHIN, self._within + self._grace + 0.5), exit=True
        )

    def lost(self, why: str) -> None:
        """The display server is gone and the thread that found it is parked for good: the
        count starts now, and is short if that thread is the main thread (the stop sequence
        cannot go on without it)."""
        if threading.current_thread() is threading.main_thread():
            self._within = 0.0
        self.arm(why)

    def durable(self) -> None:
        """Everything that must survive is written and closed."""
        self._durable.set()

    def _run(self, why: str, since: float) -> None:
        deadline = since + self._within
        while (now := time.monotonic()) < deadline:
            if now - since >= self._gone_within and self._server_gone():
                break
            time.sleep(min(0.1, deadline - now))
        if not self._durable.is_set() and not self._durable.wait(self._grace):
            log.error("the stores were still closing at the stop's deadline")
        status = self._status()
        log.error(
            "still stopping %.1f s after %s: exiting now with code %d; where it was stuck:",
            time.monotonic() - since,
            why,
            status,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        sys.stderr.flush()
        self._exit_now(status)
