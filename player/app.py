"""``pdn display``: the display process, wired together (the composition root).

Read :func:`run` top to bottom: every object is built once, fully, in the order it is needed;
the one loop (each zone's renderer reports to the engine that drives it) is closed in one
marked line;
start and stop are an explicit, logged sequence, stopped in reverse.

Threads:
- main (GUI) thread: the Qt application, the renderer, and the engine's driver
  (``player.qtloop.EngineDriver``: ``engine.tick`` when woken or due);
- ``wsgi-api``: waitress serving the Display Segment API (``server.display``), which reaches the
  display through its thread-safe methods and the screen through ``player.qtloop.GuiBridge``;
- ``outbox-display``: webhook delivery (asyncio); ``schedule-follower``, ``remote-sets``,
  ``pdn-clock`` and ``pdn-power``: background work that only calls thread-safe methods.

SIGTERM and SIGINT reach the Qt loop through ``player.qtloop.SignalWatcher``, so the process
shuts down cleanly (API closed, outbox stopped, database closed) even while Qt is blocking in C++.
The stores close before the window, which is left alone when its display server is gone
(``player.displayserver``); ``player.stopdeadline`` ends the process within 4 s of the stop
request whatever Qt is blocked in.

Exit codes (``server.platform.exitcodes``): 0 stopped cleanly, 1 could not start (port taken,
database unusable), 2 bad configuration; and :data:`EXIT_SCREEN_LOST` (3): the renderer could not
bring the screen back in this process (the web engine was lost), so the display exits for its
service manager to start a new one (crash-only). A display started after several such exits in
a row waits first, longer each time up to a minute (``player.crashonly``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import ssl
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from PySide6.QtCore import QTimer

from cds.playlist import Playlist
from player import videodecode
from player.cache import ContentCache
from player.cachedcontent import CachedContent
from player.clocksanity import ClockSanity
from player.clocksync import ClockSync
from player.config import DisplayConfig
from player.crashonly import clear_exits, note_exit, restart_delay
from player.display import ClockStatus, Display, MemoryStatus, ScreenAccess
from player.displayserver import catch_xlib_exit, connection_broke, on_lost, server_alive
from player.engine import LOAD_TIMEOUT, EngineStore
from player.follower import ScheduleFollower, console_address
from player.memory import MemoryWatch, memory_plan
from player.playback import PlaybackRecord
from player.power import start_power_schedule
from player.qtloop import (
    EngineDriver,
    GuiBridge,
    SignalWatcher,
    SystemdHooks,
    Waker,
    start_application,
)
from player.remotesets import RemoteSetFetcher
from player.renderer import KioskRenderer, RendererOptions
from player.renderer.idle import download_progress
from player.renderer.options import add_chromium_flags
from player.screen import QtScreen
from player.sdnotify import SdNotifier
from player.stopdeadline import StopDeadline
from player.store import DisplayStore, StoreError
from player.writer import DeferredQueueStore, OrderedWriter, StoredZoneQueues
from player.zones import ZoneEngine, ZoneQueues, ZoneScreen
from server.display import DisplaySecurity, create_app
from server.display.access import allowed_hosts
from server.platform.exitcodes import EXIT_OK, EXIT_SCREEN_LOST, EXIT_START_FAILED
from server.platform.limits import limits
from server.platform.net import is_loopback, local_address, url_host
from server.platform.outbox import Outbox
from server.platform.pairing import Pairing
from server.platform.signing import SeenIds, Verifier, load_or_make_secret
from server.platform.tls import ensure_certificate, fingerprint, server_context
from server.platform.wsgi import WsgiServer, bind

log = logging.getLogger("pdn.app")

#: How often the idle page's download progress is refreshed.
PROGRESS_MS = 2_000
#: A screen right this long after the start forgets the exits behind the restart back-off.
RIGHT_FOR_MS = 300_000


def utc_now() -> datetime:
    return datetime.now(UTC)


def display_url(config: DisplayConfig, host: str, port: int) -> str:
    """How others reach this display: ``public_url`` when set, else this machine's address."""
    if config.public_url:
        return config.public_url
    if host in ("0.0.0.0", "::", ""):
        host = local_address()
    return f"{'https' if config.tls else 'http'}://{url_host(host)}:{port}"


def tls_setup(config: DisplayConfig, data_dir: Path) -> tuple[ssl.SSLContext, str] | None:
    """The TLS context and certificate fingerprint ([listen] tls), or None for plain HTTP.
    The operator's files when given, else a self-signed certificate kept in ``data_dir``."""
    if not config.tls:
        return None
    if config.tls_cert is not None and config.tls_key is not None:
        cert, key = config.tls_cert, config.tls_key
    else:
        cert, key = ensure_certificate(data_dir)
    return server_context(cert, key), fingerprint(cert)


class Playing(NamedTuple):
    """What plays on a display, wired by ``assemble``."""

    playlist: Playlist
    engine: ZoneEngine
    display: Display


def assemble(
    config: DisplayConfig,
    *,
    store: DisplayStore,
    playback: PlaybackRecord,
    renderer: ZoneScreen,
    wake: Callable[[], None],
    queue: EngineStore | None = None,
    zone_queues: ZoneQueues | None = None,
    content: CachedContent | None = None,
    clock_trusted: Callable[[], bool] | None = None,
    screen: ScreenAccess | None = None,
    memory: MemoryStatus | None = None,
    clock_sync: ClockStatus | None = None,
) -> Playing:
    """The playlist over the display's CDS documents, the zone engine that drives ``renderer``
    (the screen: its regions' renderers report to the zones' engines, the one loop, closed by
    the zone engine as it makes each zone's engine), and the display that holds them. A
    display whose documents have no layout plays full screen, its main zone's engine alone.

    ``queue``, ``zone_queues``: where the main zone's engine and the other zones' keep their
    request queues (``store`` itself if None); ``content``:
    the content cache, which says what is available and where; ``clock_trusted``: whether time
    windows may open yet; ``screen``, ``memory``, ``clock_sync``: what health reports of them.
    ``run`` passes them all; a display without a screen (the API's tests) needs none."""

    def new_playlist() -> Playlist:
        return Playlist(
            config.tzinfo(),
            clock_trusted=clock_trusted,
            natural_length=content.natural_length if content is not None else None,
        )

    playlist = new_playlist()  # the main zone's: the display's documents and remote sets
    engine = ZoneEngine(
        clock=utc_now,
        schedule=playlist,
        store=queue if queue is not None else store,
        screen=renderer,  # each zone's renderer reports to its zone's engine: the loop
        new_schedule=new_playlist,
        available=content.available if content is not None else None,
        locate=content.locate if content is not None else None,
        on_playback=playback.changed,
        wake=wake,
        load_timeout=LOAD_TIMEOUT * config.screen.timeout_factor,
        zone_queues=zone_queues if zone_queues is not None else StoredZoneQueues(store),
    )
    display = Display(
        config=config,
        store=store,
        engine=engine,
        playlist=playlist,
        playback=playback,
        screen=screen,
        content=content,
        memory=memory,
        clock_sync=clock_sync,
    )
    return Playing(playlist, engine, display)


def run(
    config: DisplayConfig, *, schedule_url: str | None = None, register_url: str | None = None
) -> int:
    """Start everything, run the Qt loop until a signal, stop everything; the exit code.

    ``schedule_url`` follows a scheduler's schedule, ``register_url`` registers the display
    with a scheduler (``player.follower``)."""
    log.info("starting the display%s", f" '{config.name}'" if config.name else "")
    if config.source:
        log.info("configuration from %s", config.source)
    if not config.location:
        log.warning("no location configured: GET / reports an empty location")

    # What talks to the screen stops last, after every store is closed: with its display
    # server gone, Qt can block there, and the stop's deadline (player.stopdeadline) then ends
    # the process with nothing durable left open.
    screen_side = contextlib.ExitStack()
    deadline: StopDeadline | None = None
    with contextlib.ExitStack() as stopping:
        stopping.callback(_screen_last, screen_side, lambda: deadline)
        # 1. Durable state. Nothing below runs on a database it cannot trust.
        data_dir = config.data_dir.resolve()
        try:
            store = DisplayStore(data_dir / "display.db", play_log_rows=config.play_log_rows)
            stopping.callback(store.close)
            outbox = Outbox(store.path, name="display")
        except (StoreError, OSError, RuntimeError) as error:
            log.error("cannot use the data directory %s: %s", data_dir, error)
            return EXIT_START_FAILED
        log.info("state in %s", store.path)
        try:
            pairing = Pairing(data_dir)
            stopping.callback(pairing.close)
            # What the publishers this display subscribes to sign their updates with, and the
            # ids of the signed updates taken (a replay after a restart is dropped too).
            webhook_secret = load_or_make_secret(data_dir / "webhook-secret")
            seen_ids = SeenIds(store.path)
            stopping.callback(seen_ids.close)
        except (OSError, ValueError, RuntimeError, sqlite3.Error) as error:
            log.error("cannot keep pairings and secrets in %s: %s", data_dir, error)
            return EXIT_START_FAILED
        delay = restart_delay(data_dir)
        if delay:
            log.warning(
                "the display exited for a lost screen several times in a row: waiting %g s "
                "before starting again",
                delay,
            )
            time.sleep(delay)

        # 2. The API socket, bound before the window opens: a taken port fails fast, and the
        #    display knows the URL its idle page and webhooks carry.
        try:
            listener = bind(config.host, config.port)
        except OSError as error:
            log.error("cannot listen on %s:%d: %s", config.host, config.port, error.strerror)
            return EXIT_START_FAILED
        host, port = listener.getsockname()[:2]
        url = display_url(config, host, port)
        try:
            tls = tls_setup(config, data_dir)
        except (OSError, ValueError, RuntimeError) as error:  # ssl.SSLError is an OSError
            log.error("cannot serve HTTPS: %s", error)
            return EXIT_START_FAILED
        security = DisplaySecurity(
            pairing=pairing,
            beyond_loopback=not is_loopback(host),
            webhook_secret=webhook_secret,
            tls_fingerprint=tls[1] if tls else None,
            verifier=Verifier(store=seen_ids),
        )
        # The names it answers to (a web page cannot reach it by another): where it is open,
        # and wherever the operator named them.
        if not security.beyond_loopback or config.listen_hosts:
            security.hosts = allowed_hosts(
                host,
                port,
                names=config.listen_hosts,
                public_url=config.public_url,
            )
        if tls:
            log.info("serving HTTPS; certificate fingerprint %s", tls[1])
        if security.beyond_loopback or config.api_token:
            log.info(
                "closed: changes need %s",
                "the API token or a paired controller's token"
                if config.api_token
                else "a paired controller's token (the pairing code is on the idle page)",
            )

        # 3. Qt, on this (main) thread: the application, then the kiosk window. systemd's
        #    socket is taken out of the environment first: render processes must not inherit it.
        #    The memory plan comes first: the low-memory profile's Chromium flags are read once,
        #    when Qt WebEngine starts.
        notifier = SdNotifier.from_environment(unset=True)
        plan = memory_plan(config.screen.memory_budget_mb, config.screen.low_memory)
        add_chromium_flags(low_memory=plan.low_memory)
        log.info("Chromium flags: %s", os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", ""))
        log.info("video: %s", videodecode.apply(config.screen.video_backend).describe())
        application = start_application()
        waker = Waker()
        bridge = GuiBridge()
        # The last resort of the memory budget (player.memory): exit for systemd to restart us.
        memory = MemoryWatch(
            plan, on_restart=lambda reason: bridge.post(lambda: screen_lost(reason))
        )
        # The idle page shows the API's URL, and with TLS the fingerprint to pin.
        shown_url = f"{url}  ·  TLS {tls[1]}" if tls else url
        renderer = KioskRenderer(
            RendererOptions.from_config(
                config, shown_url, low_memory=plan.low_memory, listen=(host, port)
            ),
            memory=memory,
        )
        screen_side.callback(renderer.close)

        # 4. What plays: the schedule, the content cache, the engine, the playback record.
        #    Nothing time-windowed plays before the clock is set (NTP, or a plausible date).
        clock = ClockSanity(require_ntp=config.clock.require_ntp)
        clock_sync = ClockSync()  # what the time daemon says, for health and the fleet view
        content = CachedContent(
            ContentCache(data_dir, config=config.cache, on_ready=lambda _spec, _path: waker.wake())
        )
        stopping.callback(content.close)
        playback = PlaybackRecord(
            store=store, outbox=outbox, display_url=lambda: url, clock=utc_now
        )
        # The request queue's progress is written off the GUI thread (player.writer).
        queue_writer = OrderedWriter("queue-writer")
        playlist, engine, display = assemble(
            config,
            store=store,
            playback=playback,
            renderer=renderer,
            wake=waker.wake,
            queue=DeferredQueueStore(store, queue_writer),
            zone_queues=StoredZoneQueues(store, queue_writer),
            content=content,
            clock_trusted=clock.is_set,
            screen=QtScreen(bridge, renderer),
            memory=memory,
            clock_sync=clock_sync,
        )
        renderer.set_context(display.context())

        # 5. The display's neighbours: its API, its scheduler, remote sets, systemd.
        # A board slow enough for [screen] timeout-factor is as slow at its half of a TLS
        # handshake: the header deadline (10 s) stretches with it (server.platform.limits).
        server = WsgiServer(
            create_app(display, security),
            sock=listener,
            name="api",
            tls=tls[0] if tls else None,
            bounds=limits(slowness=config.screen.timeout_factor),
        )
        remote_sets = RemoteSetFetcher(
            remote_sets=playlist.remote_sets,
            deliver=display.set_remote_document,
            cache_dir=data_dir / "remote-sets",
        )
        follower = None
        if schedule_url or register_url:
            follower = ScheduleFollower(
                apply_cds=display.apply_cds,
                display_url=lambda: url,
                state_dir=data_dir,
                schedule_url=schedule_url,
                register_url=register_url,
                location=config.location,
                name=config.name,
                groups=list(config.groups),
                token=config.scheduler_token,
                signing_secret=webhook_secret,
                tls_fingerprint=tls[1] if tls else None,
            )
        driver = EngineDriver(engine, waker)
        outcome: list[int] = []

        def exit_status() -> int:
            if signals.reason:
                return EXIT_OK
            if lost or connection_broke():
                return EXIT_SCREEN_LOST
            return outcome[0] if outcome else EXIT_OK

        platform = application.platformName()
        deadline = StopDeadline(exit_status, server_gone=lambda: not server_alive(platform))
        # exit(), not quit(): Qt 6's quit() closes every window first, and a window's close
        # waits for Qt Quick's render thread, stuck for good on a display server that is gone
        # (with the interpreter's lock held, so no Python thread could end the stop either).
        # The window is closed at the end of the stop, when its server is there.
        signals = SignalWatcher(lambda: application.exit(0), on_stop=deadline.arm)

        def display_server_lost(why: str) -> None:
            # From the thread that found it (parked for good from here): the deadline counts,
            # and the GUI thread, if that was not it, ends the loop as for a lost screen.
            deadline.lost(why)
            bridge.post(lambda: screen_lost(why))

        on_lost(display_server_lost)
        if platform == "xcb":
            catch_xlib_exit()
        systemd = SystemdHooks(notifier, renderer, url)
        lost: list[str] = []

        def screen_lost(reason: str) -> None:
            lost.append(reason)
            note_exit(data_dir)
            log.error("exiting with code %d so that the display is restarted", EXIT_SCREEN_LOST)
            application.exit(EXIT_SCREEN_LOST)

        def forget_exits() -> None:
            if renderer.screen_right:
                clear_exits(data_dir)

        renderer.engine_lost.connect(screen_lost)
        # The renderer's timers (children): they die with it, and stop before the screen goes.
        forget = QTimer(renderer)
        forget.setSingleShot(True)
        forget.timeout.connect(forget_exits)
        forget.start(RIGHT_FOR_MS)

        # The idle page says how the schedule's files are coming ("2 of 5 ready"), the
        # pairing code of now (renewed after use or expiry); on a one-box install, where the
        # scheduler's console is too.
        shown_code: list[str] = []
        console = console_address(register_url)
        console_line = f"  ·  Console {console}" if console else ""

        def refresh_idle() -> None:
            renderer.set_idle_progress(download_progress(content.status()))
            code, _expires = pairing.current_code()
            if shown_code != [code]:
                shown_code[:] = [code]
                renderer.set_idle_pairing(f"Pairing code {code}{console_line}")

        progress = QTimer(renderer)
        progress.timeout.connect(refresh_idle)
        progress.start(PROGRESS_MS)
        screen_side.callback(progress.stop)
        screen_side.callback(forget.stop)
        refresh_idle()

        # 6. Start, in order; each part is stopped in reverse when the loop ends.
        outbox.start()
        stopping.callback(_step, "webhook delivery", outbox.stop)
        # Before delivery stops: the playback changes still queued are committed and sent.
        stopping.callback(_step, "playback record", playback.close)
        stopping.callback(_step, "request queue's progress", queue_writer.close)
        server.start()
        stopping.callback(_step, "closing the API", server.stop)
        log.info("Display Segment API on %s (base URL %s)", server.url, url)
        remote_sets.start()
        stopping.callback(remote_sets.stop)
        memory.start()
        stopping.callback(memory.stop)
        if follower is not None:
            follower.start()
            stopping.callback(follower.stop)
        clock.start(on_set=waker.wake)  # time windows may open once the clock is set
        clock_sync.start()
        stopping.callback(clock_sync.stop)
        power = start_power_schedule(config.power, config.tzinfo(), clock.is_set)
        if power is not None:
            stopping.callback(power.stop)
            # A screen the schedule switched off is dark on purpose: the watchdog's look at
            # the compositor waits until it is on again.
            scheduled = power
            renderer.compositor.suspended = lambda: scheduled.applied is False
        stopping.callback(signals.close)
        stopping.callback(driver.stop)
        stopping.callback(systemd.stopping)
        driver.start()
        log.info("display running")
        code = int(application.exec())
        outcome.append(code)
        deadline.arm("the Qt loop's end")
        forget.stop()
        progress.stop()
        server_gone = not server_alive()
        if server_gone and not signals.reason and not lost:
            # Qt ends its loop when the X connection breaks: a screen lost, for systemd to
            # start the display again once its display server is back.
            screen_lost("the display server is gone")
        ended = signals.reason or (lost[0] if lost else f"code {code}")
        log.info("stopping: Qt loop ended (%s)", ended)
    log.info("stopped")
    if lost or server_gone or not server_alive():
        # Everything durable is closed. Qt WebEngine's own teardown waits seconds for the
        # helper processes that are gone (measured: 4 s), and the screen is black meanwhile;
        # with the display server gone, Qt's teardown can wait for it for good.
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_status())
    return exit_status()


def _screen_last(
    screen_side: contextlib.ExitStack, deadline: Callable[[], StopDeadline | None]
) -> None:
    """The end of the stop: the stores are closed (the deadline may end the process from
    here on without losing a write); then the screen's side, unless its server is gone."""
    armed = deadline()
    if armed is not None:
        armed.durable()
    if not server_alive():
        # Closing the window waits for Qt Quick's render thread, which can be stuck in a call
        # to the server that is gone; the process exits without closing it.
        log.warning("stopping: the display server is gone, the window is left to the exit")
        return
    log.info("stopping: the screen")
    screen_side.close()


def _step(what: str, stop: Callable[[], None]) -> None:
    log.info("stopping: %s", what)
    stop()
