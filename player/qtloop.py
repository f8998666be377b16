"""The display's Qt side: the application, and the small objects that live on its thread.

- :func:`start_application`: Chromium's process flags, Qt's log routed to ``pdn.qt``, then the
  application (the kiosk renderer needs all three in that order).
- :class:`Waker`: a thread-safe "something changed" signal, queued onto the GUI thread.
- :class:`EngineDriver`: runs ``engine.tick`` on the GUI thread when woken or when it is due
  (the engine only ever touches the renderer from ``tick``).
- :class:`GuiBridge`: runs a function on the GUI thread from any thread, optionally waiting.
- :class:`SignalWatcher`: SIGTERM/SIGINT/SIGHUP -> a byte on a socket -> QSocketNotifier -> quit,
  so the process stops cleanly even while Qt is blocking in C++.
- :class:`SystemdHooks`: systemd's watchdog pings and readiness, from the GUI thread; no ping
  while the renderer's visual watchdog finds the screen wrong.

This module imports Qt; only the display's composition root (``player.app``) imports it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import signal
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from PySide6.QtCore import (
    QMessageLogContext,
    QObject,
    QSocketNotifier,
    Qt,
    QTimer,
    QtMsgType,
    Signal,
    qInstallMessageHandler,
)
from PySide6.QtGui import QGuiApplication

from player.renderer import KioskRenderer, prepare_process
from player.sdnotify import SdNotifier
from server.platform.logrepeat import RepeatFilter

log = logging.getLogger("pdn.app")
qt_log = logging.getLogger("pdn.qt")

T = TypeVar("T")

MAX_TIMER_MS = 60_000  # re-check at least once a minute, whatever the engine says
_SIGNAL_NUMBERS = frozenset(int(s) for s in signal.Signals)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_QT_LEVELS = {
    QtMsgType.QtDebugMsg: logging.DEBUG,
    QtMsgType.QtInfoMsg: logging.INFO,
    QtMsgType.QtWarningMsg: logging.WARNING,
    QtMsgType.QtCriticalMsg: logging.ERROR,
    QtMsgType.QtFatalMsg: logging.CRITICAL,
}


def _qt_message(kind: QtMsgType, _context: QMessageLogContext, message: str) -> None:
    qt_log.log(_QT_LEVELS.get(kind, logging.INFO), "%s", message)


def start_application() -> QGuiApplication:
    """The application (no widgets: the screen is a Qt Quick scene), with Chromium's flags and
    Qt's log in place first."""
    if os.geteuid() == 0 and "QTWEBENGINE_DISABLE_SANDBOX" not in os.environ:
        # Chromium refuses its sandbox as root (prepare_process turns it off); a kiosk
        # service runs as its own user.
        log.warning("running as root: Chromium's sandbox is off")
    qInstallMessageHandler(_qt_message)
    # A fault that repeats (a render process that keeps failing) must not flood the journal.
    repeats = RepeatFilter()
    for name in ("pdn.qt", "pdn.renderer"):
        logging.getLogger(name).addFilter(repeats)
    prepare_process()  # Chromium flags, Qt WebEngine for Qt Quick: before the application
    existing = QGuiApplication.instance()
    app = existing if isinstance(existing, QGuiApplication) else QGuiApplication(["pdn-display"])
    app.setApplicationName("pdn-display")
    return app


class Waker(QObject):
    """``wake()`` from any thread; whatever is connected to ``woken`` runs on the GUI thread."""

    woken = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._stopped = False

    def wake(self) -> None:
        if not self._stopped:
            self.woken.emit()

    def stop(self) -> None:
        self._stopped = True


class Tickable(Protocol):
    """The engine as its driver sees it."""

    def tick(self) -> datetime | None: ...


class EngineDriver(QObject):
    """Runs ``engine.tick`` on the GUI thread when woken, or when the engine said it is due."""

    def __init__(self, engine: Tickable, waker: Waker) -> None:
        super().__init__()
        self._engine = engine
        self._waker = waker
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        # Not Qt's default coarse timer (5 % of the interval late or early: 0.75 s of a 15 s
        # item): a synchronised set's turns are handed over on time.
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        waker.woken.connect(self._tick, Qt.ConnectionType.QueuedConnection)
        self._stopped = False

    def start(self) -> None:
        self._waker.wake()

    def stop(self) -> None:
        self._stopped = True
        self._waker.stop()
        self._timer.stop()

    def _tick(self) -> None:
        if self._stopped:
            return
        try:
            wakeup = self._engine.tick()
        except Exception:
            log.exception("the engine failed; trying again in 1 s")
            self._timer.start(1000)
            return
        delay_ms = MAX_TIMER_MS
        if wakeup is not None:
            seconds = (wakeup - datetime.now(UTC)).total_seconds()
            delay_ms = max(0, min(MAX_TIMER_MS, math.ceil(seconds * 1000)))
        self._timer.start(delay_ms)


class GuiBridge(QObject):
    """Run a function on the GUI thread from any thread, optionally waiting for its result.

    ``beat`` is refreshed every second on the GUI thread, so a caller that times out can say
    how long the thread has been stuck."""

    call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.call.connect(self._run, Qt.ConnectionType.QueuedConnection)
        self.beat = time.monotonic()
        self._heartbeat = QTimer(self)
        self._heartbeat.timeout.connect(self._beat)
        self._heartbeat.start(1000)

    def _beat(self) -> None:
        self.beat = time.monotonic()

    def _run(self, function: Callable[[], None]) -> None:
        function()

    def post(self, function: Callable[[], None]) -> None:
        self.call.emit(function)

    def invoke(self, function: Callable[[], T], timeout: float) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(function())
            except Exception as error:
                future.set_exception(error)

        self.call.emit(run)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


class SignalWatcher(QObject):
    """SIGTERM/SIGINT/SIGHUP end the Qt loop; ``reason`` names the signal that did."""

    def __init__(self, quit_app: Callable[[], None]) -> None:
        super().__init__()
        self.reason: str | None = None
        self._quit = quit_app
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno())
        for signum in _STOP_SIGNALS:
            signal.signal(signum, self._python_handler)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_signal)

    @staticmethod
    def _python_handler(signum: int, _frame: Any) -> None:
        # The wake-up fd already told Qt; this only keeps Python from its default action.
        return None

    def _on_signal(self) -> None:
        try:
            data = self._reader.recv(64)
        except BlockingIOError:
            return
        for signum in data:
            name = signal.Signals(signum).name if signum in _SIGNAL_NUMBERS else str(signum)
            log.info("received %s: shutting down", name)
            self.reason = name
        if self.reason:
            self._quit()

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        self._notifier.setEnabled(False)
        self._reader.close()
        self._writer.close()


class SystemdHooks(QObject):
    """systemd's watchdog and readiness (``player.sdnotify``). WATCHDOG=1 comes from a timer on
    the GUI thread, so a frozen GUI stops the pings and systemd restarts the kiosk; it is not
    sent either while the renderer's visual watchdog finds the screen wrong (the renderer gives
    up and the display exits first, within ``recover_within``; the pings stopping is the
    backstop). READY=1 is sent once the renderer reports its first frame."""

    def __init__(self, notifier: SdNotifier, renderer: KioskRenderer, api_url: str) -> None:
        super().__init__()
        self._notifier = notifier
        self._renderer = renderer
        self._api_url = api_url
        self._watchdog_timer = QTimer(self)
        interval = notifier.watchdog_interval()
        self._withheld = False
        if interval is not None:
            self._watchdog_timer.timeout.connect(self._ping)
            self._watchdog_timer.start(max(50, min(MAX_TIMER_MS, int(interval * 1000))))
            log.info("systemd watchdog: pinging every %.1f s", interval)
        self._ready_timer = QTimer(self)
        if notifier.enabled:
            self._ready_timer.timeout.connect(self._ready_after_first_frame)
            self._ready_timer.start(100)

    def _ping(self) -> None:
        if not self._renderer.screen_right:
            if not self._withheld:
                self._withheld = True
                log.warning("systemd watchdog: not pinging while the screen is wrong")
            return
        if self._withheld:
            self._withheld = False
            log.info("systemd watchdog: pinging again, the screen is right")
        self._notifier.watchdog()

    def _ready_after_first_frame(self) -> None:
        if self._renderer.last_frame_time() is None:
            return
        self._ready_timer.stop()
        self._notifier.ready(f"on screen; API at {self._api_url}")
        log.info("told systemd the display is ready")

    def stopping(self) -> None:
        self._watchdog_timer.stop()
        self._ready_timer.stop()
        self._notifier.stopping()
        self._notifier.close()
