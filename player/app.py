"""``pdn display``: the display process, wired together.

Threads:
- main (GUI) thread: the QApplication, the renderer, and the engine's driver: a single-shot
  QTimer set to the engine's next wake-up (capped, so a clock jump or a QTimer overflow cannot
  strand it), plus a queued ``wake`` signal that any thread may emit;
- ``wsgi-api``: waitress serving the Display Segment (it hands work over through the engine's
  thread-safe methods and, for a screenshot, through :class:`GuiBridge` with a timeout);
- ``outbox-display``: webhook delivery (asyncio).

Start and stop are an explicit, logged sequence. SIGTERM and SIGINT reach the Qt loop through
``signal.set_wakeup_fd`` and a QSocketNotifier, so the process shuts down cleanly (API closed,
outbox stopped, database closed) even while Qt is blocking in C++.

Exit codes: 0 clean stop, 1 could not start (port taken, database unusable), 2 bad config.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from player.config import ConfigError, DisplayConfig, load_config
from player.playitem import PlayItem, RendererListener
from player.sdnotify import SdNotifier
from player.store import DisplayStore, StoreError
from server.outbox import Outbox
from server.wsgi import WsgiServer

if TYPE_CHECKING:
    from cds.model import ContentItem, ContentSet

log = logging.getLogger("pdn.app")
qt_log = logging.getLogger("pdn.qt")

T = TypeVar("T")

_SIGNAL_NUMBERS = frozenset(int(s) for s in signal.Signals)
MAX_TIMER_MS = 60_000  # re-check at least once a minute, whatever the engine says
SCREENSHOT_TIMEOUT = 5.0
HEALTH_TIMEOUT = 2.0  # seconds for the GUI thread to answer a health probe


def load(args: argparse.Namespace) -> DisplayConfig:
    """The configuration from the file, the environment and the flags."""
    config_path = Path(args.config) if args.config else None
    return load_config(
        config_path,
        overrides={
            "host": args.host,
            "port": args.port,
            "data_dir": args.data_dir,
            "name": args.name,
            "timezone": args.timezone,
            "public_url": args.public_url,
        },
    )


def check_config(args: argparse.Namespace) -> int:
    """``pdn display --check-config``: validate, print the effective settings, exit."""
    try:
        config = load(args)
    except ConfigError as error:
        print(f"pdn display: {error}", file=sys.stderr)
        return 2
    print(f"configuration OK{f' ({config.source})' if config.source else ''}")
    print(f"  name:            {config.name or '(none)'}")
    print(f"  listen:          {config.host}:{config.port}")
    print(f"  data dir:        {config.data_dir}")
    print(f"  time zone:       {config.timezone}")
    print(f"  location:        {config.location or '(none)'}")
    print(f"  accept CDS:      {'yes' if config.accept_cds else 'no (single items only)'}")
    print(f"  allowed origins: {', '.join(config.allowed_origins) or 'any'}")
    print(f"  API token:       {'set' if config.api_token else 'none (open)'}")
    return 0


def main(args: argparse.Namespace) -> int:
    if getattr(args, "check_config", False):
        return check_config(args)
    try:
        config = load(args)
    except ConfigError as error:
        log.error("%s", error)
        return 2
    return run(config, follow=args)


def local_address() -> str:
    """This machine's address as others see it (no packet is sent), else its host name."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a route lookup only
            return str(probe.getsockname()[0])
        except OSError:
            return socket.gethostname()


def base_url_for(config: DisplayConfig, server: WsgiServer) -> str:
    if config.public_url:
        return config.public_url
    host = server.host
    if host in ("0.0.0.0", "::", ""):
        host = local_address()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{server.port}"


def run(config: DisplayConfig, follow: argparse.Namespace | None = None) -> int:
    """Start everything, run the Qt loop until a signal, stop everything.

    ``follow`` carries ``--schedule`` / ``--register`` (player/follower.py)."""
    log.info("starting the display%s", f" '{config.name}'" if config.name else "")
    if config.source:
        log.info("configuration from %s", config.source)
    if not config.location:
        log.warning("no location configured: GET / reports an empty location")

    # 1. Durable state. Nothing below runs on a database it cannot trust.
    data_dir = config.data_dir.resolve()
    try:
        store = DisplayStore(data_dir / "display.db")
        outbox = Outbox(store.path, name="display")
    except (StoreError, OSError, RuntimeError) as error:
        log.error("cannot use the data directory %s: %s", data_dir, error)
        return 1
    log.info("state in %s", store.path)

    # 2. The service: CDS documents and the request queue come back from the database.
    from cds.evaluate import Playlist
    from player.clocksanity import ClockSanity
    from server.display import DisplayService, create_app

    server_box: list[WsgiServer] = []
    # Nothing time-windowed plays before the clock is set (NTP, or a plausible date).
    clock = ClockSanity(require_ntp=bool(config.sections.get("clock", {}).get("require_ntp")))
    playlist = Playlist(config.tzinfo(), clock_trusted=clock.is_set)
    engine_box: list[Any] = []
    content = make_content(data_dir, lambda: engine_box[0].poke() if engine_box else None)
    service = DisplayService(
        config=config,
        store=store,
        outbox=outbox,
        schedule=playlist,
        base_url=lambda: base_url_for(config, server_box[0]),
        available=content.available if content else None,
        locate=content.locate if content else None,
        on_documents=content.documents_changed if content else None,
    )
    engine_box.append(service.engine)
    if content is not None:
        service.cache_status = content.status

    # 3. The API socket, bound before the window opens so a taken port fails fast.
    try:
        server = WsgiServer(create_app(service), config.host, config.port, name="api")
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", config.host, config.port, error.strerror)
        store.close()
        return 1
    server_box.append(server)

    # 4. Qt, on this (main) thread.
    qt = _QtDisplay(config, service, base_url_for(config, server))
    from player.follower import start_for_display

    stop_following: Callable[[], None] = lambda: None  # noqa: E731
    from player.power import PowerScheduler, start_power_schedule

    power: PowerScheduler | None = None
    try:
        outbox.start()
        server.start()
        log.info(
            "Display Segment API on %s (base URL %s)", server.url, base_url_for(config, server)
        )
        stop_following = start_for_display(
            schedule_url=getattr(follow, "schedule", None),
            register_url=getattr(follow, "register", None),
            service=service,
            playlist=playlist,
            display_url=lambda: base_url_for(config, server),
            data_dir=data_dir,
            location=config.location,
            name=config.name,
        )
        # Daily screen on/off ([power]); it never blanks on a clock that is not set yet.
        clock.start(on_set=service.engine.poke)
        power = start_power_schedule(config.sections, config.tzinfo(), clock.is_set)
        code = qt.exec()
    finally:
        if power is not None:
            power.stop()
        stop_following()
        log.info("stopping: closing the API")
        server.stop()
        log.info("stopping: webhook delivery")
        outbox.stop()
        qt.close()
        if content is not None:
            content.close()
        store.close()
        log.info("stopped")
    return code


HTML_TYPES = ("text/html", "application/xhtml+xml")


class CachedContent:
    """Which scheduled items may play and what the renderer loads (CDS.md, "Files").

    An item whose file has hashes, or is not a web page (an image, a video), plays only from
    the content cache, once downloaded and verified; the renderer then loads the local copy.
    A web page without hashes is loaded live (the renderer's failure report and the engine's
    back-off cover it being unreachable).
    """

    def __init__(self, cache: Any, spec_type: Any) -> None:
        self.cache = cache
        self._spec_type = spec_type

    @staticmethod
    def needs_cache(item: ContentItem) -> bool:
        if not item.files:
            return False
        if item.files[0].hashes:
            return True
        media = (item.content_type or "").split(";")[0].strip().lower()
        return bool(media) and media not in HTML_TYPES

    def _spec(self, item: ContentItem) -> Any:
        return self._spec_type.from_required_file(item.files[0], item.size)

    def available(self, item: ContentItem) -> bool:
        return not self.needs_cache(item) or bool(self.cache.is_ready(self._spec(item)))

    def locate(self, item: ContentItem) -> str:
        if self.needs_cache(item):
            path = self.cache.path_for(self._spec(item))
            if path is not None:
                return str(Path(path).as_uri())
        return item.url

    def documents_changed(self, documents: list[ContentSet]) -> None:
        specs = [
            self._spec(item)
            for document in documents
            for item in document.walk_items()
            if self.needs_cache(item)
        ]
        self.cache.wanted(specs)

    def status(self) -> dict[str, Any]:
        stats = self.cache.stats()
        return {
            "files": stats.files,
            "bytes": stats.bytes,
            "max-bytes": stats.max_bytes,
            "queued": stats.queued,
            "failing": len(stats.failing),
        }

    def close(self) -> None:
        self.cache.close()


def make_content(data_dir: Path, wake: Callable[[], None]) -> CachedContent | None:
    """The content cache (``player.cache``) when it is installed; None plays everything live."""
    try:
        from player.cache import ContentCache, FileSpec
    except ImportError as error:
        log.warning("no content cache (%s): every item is loaded live", error)
        return None
    cache = ContentCache(data_dir, on_ready=lambda _spec, _path: wake())
    return CachedContent(cache, FileSpec)


class _QtDisplay:
    """The Qt half: application, renderer, engine driver, GUI bridge, signal handling."""

    def __init__(self, config: DisplayConfig, service: Any, api_url: str) -> None:
        if os.geteuid() == 0 and "QTWEBENGINE_DISABLE_SANDBOX" not in os.environ:
            # Chromium refuses its sandbox as root; a kiosk service runs as its own user.
            os.environ["QTWEBENGINE_DISABLE_SANDBOX"] = "1"
            log.warning("running as root: Chromium's sandbox is off")
        from PySide6.QtCore import QCoreApplication, Qt, QtMsgType, qInstallMessageHandler
        from PySide6.QtWebEngineWidgets import QWebEngineView  # noqa: F401  (before QApplication)
        from PySide6.QtWidgets import QApplication

        levels = {
            QtMsgType.QtDebugMsg: logging.DEBUG,
            QtMsgType.QtInfoMsg: logging.INFO,
            QtMsgType.QtWarningMsg: logging.WARNING,
            QtMsgType.QtCriticalMsg: logging.ERROR,
            QtMsgType.QtFatalMsg: logging.CRITICAL,
        }

        def qt_message(kind: Any, _context: Any, message: str) -> None:
            qt_log.log(levels.get(kind, logging.INFO), "%s", message)

        qInstallMessageHandler(qt_message)
        QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
        kiosk = kiosk_renderer_module()
        if kiosk is not None:
            kiosk.prepare_process()  # Chromium flags: before the QApplication exists
        self.app = QApplication.instance() or QApplication(["pdn-display"])
        self.app.setApplicationName("pdn-display")
        self.service = service
        self.bridge = GuiBridge()
        self.renderer = make_renderer(config, api_url)
        self.screen = QtScreen(self.bridge, self.renderer)
        service.screen = self.screen
        engine = service.engine
        engine.set_renderer(self.renderer)
        # Renderer reports go straight to the engine: it is thread-safe and wakes the driver.
        listener: RendererListener = engine  # (checked: the engine is a whole listener)
        self.renderer.set_listener(listener)
        self.driver = EngineDriver(engine)
        engine.set_wake(self.driver.wake_up)
        self.signals = SignalWatcher(self.app.quit)
        self.screen.set_context(service.context())
        self._start_systemd_hooks(api_url)

    def exec(self) -> int:
        self.driver.wake_up()
        log.info("display running")
        code = int(self.app.exec())
        log.info("stopping: Qt loop ended (%s)", self.signals.reason or f"code {code}")
        return 0 if self.signals.reason else code

    def _start_systemd_hooks(self, api_url: str) -> None:
        """systemd's watchdog and readiness (player/sdnotify.py). WATCHDOG=1 comes from a timer
        on this (GUI) thread, so a frozen GUI stops the pings and systemd restarts the kiosk;
        READY=1 once the renderer reports its first frame."""
        from PySide6.QtCore import QTimer

        # unset: Qt WebEngine's render processes must not inherit the socket.
        self.notifier = SdNotifier.from_environment(unset=True)
        self._api_url = api_url
        self._watchdog_timer = QTimer()
        interval = self.notifier.watchdog_interval()
        if interval is not None:
            self._watchdog_timer.timeout.connect(self.notifier.watchdog)
            self._watchdog_timer.start(max(50, min(MAX_TIMER_MS, int(interval * 1000))))
            log.info("systemd watchdog: pinging every %.1f s", interval)
        self._ready_timer = QTimer()
        if self.notifier.enabled:
            self._ready_timer.timeout.connect(self._notify_ready_after_first_frame)
            self._ready_timer.start(100)

    def _notify_ready_after_first_frame(self) -> None:
        last_frame = getattr(self.renderer, "last_frame_time", None)
        if callable(last_frame) and last_frame() is None:
            return
        self._ready_timer.stop()
        self.notifier.ready(f"on screen; API at {self._api_url}")
        log.info("told systemd the display is ready")

    def close(self) -> None:
        self.notifier.stopping()
        self.notifier.close()
        self._watchdog_timer.stop()
        self._ready_timer.stop()
        self.driver.stop()
        self.signals.close()
        close = getattr(self.renderer, "close", None)
        if callable(close):
            close()


@cache
def _qobject_classes() -> tuple[type, type, type]:
    """Qt classes defined on first use, so importing this module does not import Qt."""
    from PySide6.QtCore import QObject, QSocketNotifier, Qt, QTimer, Signal

    class EngineDriverImpl(QObject):
        """Runs ``engine.tick`` on the GUI thread when woken or when it is due."""

        # Emitted from any thread; delivered (queued) on the GUI thread.
        woken = Signal()

        def __init__(self, engine: Any) -> None:
            super().__init__()
            self._engine = engine
            self._timer = QTimer(self)
            self._timer.setSingleShot(True)
            self._timer.timeout.connect(self._tick)
            self.woken.connect(self._tick, Qt.ConnectionType.QueuedConnection)
            self._stopped = False

        def wake_up(self) -> None:
            if not self._stopped:
                self.woken.emit()

        def stop(self) -> None:
            self._stopped = True
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

    class GuiBridgeImpl(QObject):
        """Run a function on the GUI thread from any thread, optionally waiting for it."""

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

    class SignalWatcherImpl(QObject):
        """SIGTERM/SIGINT -> a byte on a socket -> QSocketNotifier -> quit, in the Qt loop."""

        def __init__(self, quit_app: Callable[[], None]) -> None:
            super().__init__()
            self.reason: str | None = None
            self._quit = quit_app
            self._reader, self._writer = socket.socketpair()
            self._reader.setblocking(False)
            self._writer.setblocking(False)
            self._previous_fd = signal.set_wakeup_fd(self._writer.fileno())
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
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
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            self._notifier.setEnabled(False)
            self._reader.close()
            self._writer.close()

    return EngineDriverImpl, GuiBridgeImpl, SignalWatcherImpl


def EngineDriver(engine: Any) -> Any:  # noqa: N802  (a factory standing in for the class)
    return _qobject_classes()[0](engine)


def GuiBridge() -> Any:  # noqa: N802
    return _qobject_classes()[1]()


def SignalWatcher(quit_app: Callable[[], None]) -> Any:  # noqa: N802
    return _qobject_classes()[2](quit_app)


class QtScreen:
    """:class:`server.display.service.ScreenAccess` over the GUI bridge."""

    def __init__(self, bridge: Any, renderer: Any) -> None:
        self._bridge = bridge
        self._renderer = renderer

    def grab_png(self, timeout: float = SCREENSHOT_TIMEOUT) -> bytes:
        grab = getattr(self._renderer, "grab_png", None)
        if not callable(grab):
            raise RuntimeError("the renderer cannot take screenshots")
        png = self._bridge.invoke(grab, timeout)
        if not isinstance(png, bytes | bytearray) or not png:
            raise RuntimeError("the renderer returned no image")
        return bytes(png)

    def status(self) -> dict[str, Any]:
        """Asked on the GUI thread (with a timeout), which also proves that thread answers."""

        def probe() -> tuple[bool, float | None]:
            alive = bool(getattr(self._renderer, "alive", True))
            last = getattr(self._renderer, "last_frame_time", None)
            when = last() if callable(last) else None
            return alive, when if isinstance(when, int | float) else None

        started = time.monotonic()
        try:
            renderer_alive, last_frame = self._bridge.invoke(probe, HEALTH_TIMEOUT)
        except TimeoutError:
            return {
                "alive": False,
                "gui-lag": round(time.monotonic() - self._bridge.beat, 3),
                "last-frame": None,
                "renderer": type(self._renderer).__name__,
                "problem": f"the GUI thread did not answer within {HEALTH_TIMEOUT:g} s",
            }
        lag = time.monotonic() - started
        frame = None
        if last_frame is not None:
            # last_frame_time() is time.monotonic(); report it on the wall clock.
            frame = datetime.fromtimestamp(time.time() - (time.monotonic() - last_frame), UTC)
        return {
            "alive": renderer_alive,
            "gui-lag": round(lag, 3),
            "last-frame": frame.isoformat() if frame else None,
            "renderer": type(self._renderer).__name__,
        }

    def set_context(self, readings: dict[str, Any]) -> None:
        setter = getattr(self._renderer, "set_context", None)
        if callable(setter):
            self._bridge.post(lambda: setter(readings))


def kiosk_renderer_module() -> Any | None:
    """``player.renderer`` (the kiosk renderer) when it is installed, else None."""
    try:
        import player.renderer as kiosk
    except ImportError as error:
        log.info("kiosk renderer unavailable (%s)", error)
        return None
    return kiosk if hasattr(kiosk, "KioskRenderer") else None


def make_renderer(config: DisplayConfig, api_url: str) -> Any:
    """The kiosk renderer when it is installed, else the minimal one below."""
    kiosk = kiosk_renderer_module()
    if kiosk is None:
        log.info("renderer: minimal (single view)")
        return MinimalRenderer(config, api_url)
    log.info("renderer: %s", kiosk.KioskRenderer.__name__)
    return kiosk.KioskRenderer(kiosk.RendererOptions.from_config(config, api_url))


class MinimalRenderer:
    """One fullscreen QWebEngineView: loads each item and reports it shown when loaded.

    Plain, with a visible reload between items; the kiosk renderer (``player.renderer``)
    replaces it with double-buffered views.
    """

    def __init__(self, config: DisplayConfig, api_url: str) -> None:
        from PySide6.QtCore import Qt, QUrl
        from PySide6.QtWebEngineWidgets import QWebEngineView
        from PySide6.QtWidgets import QApplication

        self._url_type = QUrl
        self._config = config
        self._api_url = api_url
        self._listener: RendererListener | None = None
        self._item: PlayItem | None = None
        self._last_frame: float | None = None  # time.monotonic(), as the kiosk renderer
        self._view = QWebEngineView()
        self._view.setWindowFlags(Qt.WindowType.FramelessWindowHint)
        self._view.setCursor(Qt.CursorShape.BlankCursor)
        screens = QApplication.screens()
        if screens:
            screen = screens[min(config.screen.index, len(screens) - 1)]
            self._view.setGeometry(screen.geometry())
        self._view.loadFinished.connect(self._loaded)
        self._view.showFullScreen()

    def set_listener(self, listener: RendererListener) -> None:
        self._listener = listener

    def prepare(self, item: PlayItem) -> None:
        return None  # one view only: nothing to load ahead

    def show(self, item: PlayItem) -> None:
        self._item = item
        self._view.load(self._url_type(item.url))

    def show_idle(self) -> None:
        self._item = None
        name = escape(self._config.name or "pdn display")
        self._view.setHtml(
            "<html><body style='background:#123;color:#eee;font:32px sans-serif;"
            "display:flex;flex-direction:column;justify-content:center;align-items:center;"
            f"height:100vh;margin:0'><h1>{name}</h1><p>Nothing scheduled.</p>"
            f"<p>Display API: {escape(self._api_url)}</p></body></html>"
        )
        self._last_frame = time.monotonic()
        if self._listener is not None:
            self._listener.idle_shown(datetime.now(UTC))

    def _loaded(self, ok: bool) -> None:
        item = self._item
        if item is None or self._listener is None:
            return
        if not ok and self._view.url() != self._url_type(item.url):
            return  # the previous page's load, aborted by this one
        self._item = None
        if ok:
            self._last_frame = time.monotonic()
            self._listener.item_shown(item.token, datetime.now(UTC), None)
        else:
            self._listener.item_failed(item.token, "the page did not load")

    def grab_png(self) -> bytes:
        from PySide6.QtCore import QBuffer, QByteArray, QIODevice

        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self._view.grab().save(buffer, "PNG")
        buffer.close()
        return bytes(data.data())

    def last_frame_time(self) -> float | None:
        return self._last_frame

    @property
    def alive(self) -> bool:
        return self._view.isVisible()

    def close(self) -> None:
        from shiboken6 import delete

        self._view.close()
        # Delete now: the loop has ended, so deleteLater would never run and WebEngine
        # would complain that its profile outlives the page.
        delete(self._view)
