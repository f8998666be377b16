"""The scheduler's parts wired together: storage, outbox, schedules watcher, prober, API server."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from werkzeug.middleware.dispatcher import DispatcherMiddleware

from server.platform.net import is_loopback
from server.platform.pins import OriginBook, PinBook
from server.platform.sql import SqliteDatabase
from server.platform.standalone import SegmentService, display_token, enrolment_token
from server.platform.wsgi import MAX_BODY
from server.scheduler.app import create_app, schedule_topic
from server.scheduler.backfill import PlayBackfill
from server.scheduler.broadcast import Broadcasts, add_broadcast_routes
from server.scheduler.console import create_console_app
from server.scheduler.enrol import SchedulerAccess, add_display, approve
from server.scheduler.fleet import Fleet
from server.scheduler.fleetstatus import (
    FleetStatus,
    MemoryStatusBook,
    StatusBook,
    add_fleet_status_routes,
)
from server.scheduler.media.api import MediaLimits, add_media_routes
from server.scheduler.media.store import CHUNK, MediaStore
from server.scheduler.playlists.api import add_playlist_routes
from server.scheduler.playlists.library import Playlists
from server.scheduler.playlists.welcome import make_first_playlist
from server.scheduler.plays import (
    INGEST_PREFIX,
    add_plays_routes,
    create_ingest_app,
    ingest_signing_secret,
)
from server.scheduler.probes import MemoryProbeQueue, ProbeQueue
from server.scheduler.registration import RegistrationPolicy
from server.scheduler.registry import DisplayProber
from server.scheduler.schedules import ScheduleLibrary
from server.scheduler.sessions import ConsoleSessions, idle_from_env
from server.scheduler.storage import PlayRecord, SchedulerStorage

if TYPE_CHECKING:
    from server.platform.outbox import Outbox

log = logging.getLogger("pdn.scheduler")


class SchedulerService(SegmentService):
    """One scheduler: ``start()`` it, read ``url``, ``stop()`` it (the CLI and tests use this)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        schedules_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        refresh_interval: float = 300.0,
        storage: SchedulerStorage | None = None,
        public_url: str | None = None,
        database: str | None = None,
        welcome_group: str | None = None,
    ) -> None:
        """``public_url``: how displays reach this scheduler (their playback updates come
        to it); default: the address it listens on (this machine's, for 0.0.0.0).
        ``database``: a ``postgresql://`` URL (default: ``PDN_DATABASE_URL``) puts the registry,
        schedules, fleet and outbox in PostgreSQL, shared with the other scheduler processes
        on it; without, they live in SQLite files in ``data_dir``.
        ``schedules_dir``: a folder of ``<id>.xml`` files to import schedules from and watch
        (optional: the schedules themselves live in the storage).
        ``welcome_group``: at the first start, make the ``welcome`` playlist (where the console
        is) and assign it to this group (the one-box install:
        ``server.scheduler.playlists.welcome``)."""
        super().__init__("scheduler")
        database = database or os.environ.get("PDN_DATABASE_URL") or None
        self._pool: Any = None
        self.outbox: Outbox
        # The certificates of displays serving HTTPS, pinned when they registered (read from
        # the storage made below, when first needed).
        self.pins = PinBook(self._tls_pins)
        # The tokens the scheduler got by pairing with displays (the console's "Add a display").
        self.tokens = OriginBook(self._push_tokens)
        # Who may change what (server.scheduler.enrol): the operator token guards the fleet.
        self.access = SchedulerAccess(
            operator_token=token,
            enrolment_token=enrolment_token(),
            beyond_loopback=not is_loopback(host),
        )
        if self.access.beyond_loopback and token is None:
            log.warning(
                "listening on %s with no operator token: schedules, assignments, groups,"
                " broadcasts and the console refuse every change; set PDN_API_TOKEN",
                host,
            )
        if database:
            from server.platform.pg import PgDatabase, open_pool
            from server.platform.pgoutbox import PgOutbox

            self._pool = open_pool(database, name="scheduler", max_size=10)
            self.outbox = PgOutbox(
                self._pool,
                name="scheduler",
                pins=self.pins.pin,
                tokens=self.tokens.get,
            )
            self.storage = storage or SchedulerStorage(PgDatabase(self._pool))
        else:
            self.outbox = self._outbox(data_dir, pins=self.pins.pin, tokens=self.tokens.get)
            # A registration answered 201 must survive a power cut: synchronous=FULL.
            self.storage = storage or SchedulerStorage(
                SqliteDatabase(data_dir / "scheduler.sqlite3", busy_timeout=5.0)
            )
        self.library = ScheduleLibrary(schedules_dir, self.storage, self._publish)
        self.broadcasts = Broadcasts()
        self.fleet = Fleet(
            self.storage, self.library, self.outbox, extra=self.broadcasts.documents_for
        )
        self.broadcasts.fleet = self.fleet
        self.library.on_change = self.fleet.schedule_changed
        # Whose turn it is to be read, and what the reads found: in this process's memory with
        # SQLite; in the database with PostgreSQL, so the processes divide the reads.
        queue: ProbeQueue
        book: StatusBook
        if self._pool is not None:
            from server.scheduler.pgfleet import PgProbeQueue, PgStatusBook

            queue, book = PgProbeQueue(self._pool), PgStatusBook(self._pool)
        else:
            queue, book = MemoryProbeQueue(self.storage), MemoryStatusBook()
        self.prober = DisplayProber(
            self.storage,
            refresh_interval=refresh_interval,
            on_back=self._back,
            subscriber_for=self._playback_subscriber,
            signing_secret_for=self._playback_signing_secret,
            display_token=display_token(),
            queue=queue,
            pins=self.pins.pin,
            tokens=self.tokens.get,
        )
        # The plays it missed, read from the displays' play logs.
        self.backfill = PlayBackfill(self.storage, bearer=self.prober.bearer, pins=self.pins.pin)
        # What every display is doing now: GET /x/fleet.
        self.fleet_status = FleetStatus(
            self.storage,
            interval=min(refresh_interval, 10.0),
            display_token=display_token(),
            queue=queue,
            book=book,
            pins=self.pins.pin,
            tokens=self.tokens.get,
        )
        self.public_url = public_url.rstrip("/") if public_url else None
        self._data_dir = data_dir
        self._welcome_group = welcome_group
        self.app = create_app(
            self.storage,
            self.library,
            self.outbox,
            on_register=self._registered,
            on_pin=self.pins.set,
            on_paired=self._paired,
            access=self.access,
            fleet=self.fleet,
            registration=RegistrationPolicy.from_env(),
        )
        add_plays_routes(self.app, self.storage)
        add_broadcast_routes(self.app, self.broadcasts)
        add_fleet_status_routes(self.app, self.storage, self.fleet_status)
        # The media library: its items and bytes in the same database (docs/media.md).
        limits = MediaLimits.from_env()
        self.media = MediaStore(self.storage.database, quota=limits.quota)
        # Playlists of its items (and web links), each served as a schedule of the same id.
        self.playlists = Playlists(self.storage, self.media, self.library, self.base_url)
        add_media_routes(
            self.app,
            self.media,
            self.storage,
            self.access,
            limits=limits,
            used_by=self.playlists.used_by,
            delete=lambda sha256, force: self.playlists.delete_media(sha256, force=force),
            spool_dir=data_dir if data_dir.is_dir() else None,
        )
        add_playlist_routes(self.app, self.playlists)
        # The displays' playback updates come in beside the API, outside its token's reach
        # (displays send none): each display's URL carries a secret of its own instead, and
        # each update is signed with a secret made from it (Standard Webhooks).
        ingest = create_ingest_app(self.storage, on_play=self._played)
        # The console (server-rendered pages, its own sign-in cookie), beside the API too.
        console = create_console_app(
            storage=self.storage,
            library=self.library,
            fleet=self.fleet,
            status=self.fleet_status,
            broadcasts=self.broadcasts,
            token=token,
            closed=self.access.closed,
            approve=lambda url: approve(self.storage, url, self._approved),
            add_display=self._add_display,
            sessions=(
                ConsoleSessions(self.storage.database, token, idle=idle_from_env())
                if token
                else None
            ),
            media=self.media,
            playlists=self.playlists,
            api=self.app.wsgi_app,
        )
        self.app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
            self.app.wsgi_app, {INGEST_PREFIX: ingest.wsgi_app, "/console": console.wsgi_app}
        )
        self._listen(
            self.app,
            host,
            port,
            self.outbox,
            self.library,
            self.prober,
            self.fleet_status,
            self.backfill,
            # An upload is the largest file taken, and a multipart envelope.
            max_body=max(MAX_BODY, limits.max_bytes + CHUNK),
        )

    def _back(self, url: str) -> None:
        """A display answers again: push it everything, read the plays it made meanwhile."""
        self.backfill.wanted(url)
        self.fleet.reachable_again(url)

    def _played(self, play: PlayRecord) -> None:
        self.broadcasts.played(play)
        self.fleet_status.played(play)

    def base_url(self) -> str:
        """How the displays reach this scheduler: ``public_url``, else where it listens."""
        return self.public_url or _reachable(self.server.url)

    def _playback_subscriber(self, url: str) -> str | None:
        secret = self.storage.ingest_secret(url)
        if secret is None:
            return None
        return f"{self.base_url()}{INGEST_PREFIX}/{secret}"

    def _tls_pins(self) -> dict[str, str]:
        return self.storage.tls_pins()

    def _push_tokens(self) -> dict[str, str]:
        """The token each display gets with what is pushed to it: the one got by pairing with
        it, else ``PDN_DISPLAY_TOKEN`` for an approved registered display. No other subscriber
        of a schedule gets a token: it is a display's credential, not the subscriber's."""
        tokens = self.storage.push_tokens()
        shared = display_token()
        if shared:
            for record in self.storage.displays():
                if not record.pending:
                    tokens.setdefault(record.url, shared)
        return tokens

    def _paired(self, url: str, token: str, pin: str | None) -> None:
        self.tokens.set(url, token)
        if pin is not None:
            self.pins.set(url, pin)

    def _approved(self, url: str) -> None:
        self._registered(url, None)

    def _add_display(self, url: str, code: str) -> str | None:
        """The console's "Add a display" (``server.scheduler.enrol.add_display``)."""
        return add_display(self.storage, url, code, on_paired=self._paired_and_pushed)

    def _paired_and_pushed(self, url: str, token: str, pin: str | None) -> None:
        self._paired(url, token, pin)
        self._registered(url, None)

    def _playback_signing_secret(self, url: str) -> str | None:
        secret = self.storage.ingest_secret(url)
        return None if secret is None else ingest_signing_secret(secret)

    def _registered(self, url: str, groups: list[str] | None) -> None:
        self.fleet.registered(url, groups)
        self.backfill.wanted(url)  # its plays from the first not stored
        self.prober.poke(url)  # due at once in the queue the prober and fleet status share
        self.fleet_status.poke()

    def _publish(self, schedule_id: str, body: bytes, connection: Any = None) -> None:
        """``connection``: the storage's transaction storing the change (PostgreSQL: the
        outbox's events join it, so they exist exactly when the change was stored)."""
        if connection is not None:
            self.outbox.publish(
                schedule_topic(schedule_id), body, "text/xml", connection=connection
            )
            self.outbox.notify()
        else:
            self.outbox.publish(schedule_topic(schedule_id), body, "text/xml")

    def start(self) -> SchedulerService:
        super().start()
        # Playlists' media URLs name this scheduler's address, which may differ from the
        # last run's (another port, another --public-url): their CDS is written again if so.
        self.playlists.refresh()
        if self._welcome_group:
            make_first_playlist(
                data_dir=self._data_dir,
                group=self._welcome_group,
                console_url=f"{self.base_url()}/console/",
                media=self.media,
                playlists=self.playlists,
                schedules=self.library,
                fleet=self.fleet,
            )
        # Every display gets what it should hold now: what changed while the scheduler was
        # down, and the removal of a broadcast that was under way when it stopped.
        self.fleet.sync_all()
        # And every display's plays it missed meanwhile.
        self.storage.want_all_plays()
        return self

    def stop(self) -> None:
        self.broadcasts.stop()
        super().stop()
        self.storage.close()
        if self._pool is not None:
            self._pool.close()


def _reachable(url: str) -> str:
    """The listen URL, with this machine's address for a wildcard host."""
    from server.platform.net import local_address, url_host

    parts = urlsplit(url)
    if parts.hostname in ("0.0.0.0", "::"):
        return f"http://{url_host(local_address())}:{parts.port}"
    return url
