"""The Display Segment in-process on a real waitress server, with a real store (a pytest plugin:
the ``display``, ``make_display``, ``display_server`` and ``make_screen`` fixtures).

What plays is wired by the product's own ``player.app.assemble``, as ``pdn display`` wires it;
the engine is driven by a plain thread here (the Qt driver of ``player.qtloop`` is tested by the
end-to-end tests of the real ``pdn display``), and the renderer is a stand-in that paints every
item at once, except URLs containing ``/fail``, which it reports as failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask

from player.config import DisplayConfig
from player.display import ClockStatus
from player.display import Display as DisplayCore
from player.engine import Engine
from player.playback import PlaybackRecord
from player.playitem import PlayItem, RendererListener
from player.store import DisplayStore
from player.zones import ScreenLayout, ZoneEngine
from server.display import DisplaySecurity, create_app
from server.platform.net import is_loopback
from server.platform.outbox import Outbox
from server.platform.pairing import Pairing
from server.platform.wsgi import WsgiServer
from tests.support.tools import SourceClients
from tests.support.waiting import wait_for_value, wait_until


class InstantRenderer:
    """Paints every item the moment it is asked to (failing URLs with '/fail' in them). It is
    the screen too (``player.zones.ZoneScreen``): the main zone's renderer, and one more of its
    kind for each other zone of a layout."""

    def __init__(self) -> None:
        self.listener: RendererListener | None = None
        self.shown: list[PlayItem] = []
        self.prepared: list[PlayItem] = []
        self.idle = 0
        self.layouts: list[ScreenLayout | None] = []
        self.zones: dict[str, InstantRenderer] = {}

    def split(self, layout: ScreenLayout | None) -> None:
        self.layouts.append(layout)

    def renderer(self, zone: str) -> InstantRenderer:
        return self if zone == "main" else self.zones.setdefault(zone, InstantRenderer())

    def set_listener(self, listener: RendererListener) -> None:
        self.listener = listener

    def prepare(self, item: PlayItem) -> None:
        self.prepared.append(item)

    def show(self, item: PlayItem) -> None:
        assert self.listener is not None
        if "/fail" in item.url:
            self.listener.item_failed(item.token, "test: this URL fails")
            return
        self.shown.append(item)
        self.listener.item_shown(item.token, datetime.now(UTC), None)

    def show_idle(self) -> None:
        assert self.listener is not None
        self.idle += 1
        self.listener.idle_shown(datetime.now(UTC))


class ThreadDriver:
    """Calls ``engine.tick`` when woken or due, on its own thread (the Qt driver's job)."""

    def __init__(self, engine: Engine | ZoneEngine, wake: threading.Event) -> None:
        self._engine = engine
        self._event = wake
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="engine-driver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            wakeup = self._engine.tick()
            timeout = 1.0
            if wakeup is not None:
                timeout = min(1.0, max(0.0, (wakeup - datetime.now(UTC)).total_seconds()))
            self._event.wait(timeout)
            self._event.clear()

    def stop(self) -> None:
        self._stop = True
        self._event.set()
        self._thread.join(5)


@dataclass
class Display:
    """One display under test: its URL, parts, and small HTTP helpers."""

    url: str
    service: DisplayCore
    store: DisplayStore
    outbox: Outbox
    renderer: InstantRenderer
    config: DisplayConfig
    data_dir: Path
    driver: ThreadDriver
    playback_record: PlaybackRecord
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(self.url + path, timeout=10, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.post(self.url + path, timeout=10, **kwargs)

    def playback(self) -> dict[str, Any]:
        response = self.get("/playback/")
        assert response.status_code == 200
        body: dict[str, Any] = response.json()
        return body

    def wait_playback(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 15.0
    ) -> dict[str, Any]:
        return wait_for_value(self.playback, check, timeout, "a playback record as wanted")


@pytest.fixture(scope="session")
def display_server() -> Iterator[tuple[Flask, WsgiServer]]:
    """One waitress server for the session; each test installs its own display into it."""
    placeholder: Any = type("Placeholder", (), {"api_token": None})()
    app = create_app(placeholder)
    server = WsgiServer(app, "127.0.0.1", 0, name="test-display").start()
    yield app, server
    server.stop()


def build_display(
    app: Flask,
    server: WsgiServer,
    data_dir: Path,
    config: DisplayConfig,
    clock_sync: ClockStatus | None = None,
) -> Display:
    from player.app import assemble, utc_now  # the product's wiring (it loads Qt: imported late)

    config.data_dir = data_dir
    store = DisplayStore(data_dir / "display.db")
    outbox = Outbox(store.path, name="display", first_retry=0.2, max_backoff=1.0)
    playback = PlaybackRecord(
        store=store, outbox=outbox, display_url=lambda: server.url, clock=utc_now
    )
    renderer = InstantRenderer()
    wake = threading.Event()
    _playlist, engine, service = assemble(
        config,
        store=store,
        playback=playback,
        renderer=renderer,
        wake=wake.set,
        clock_sync=clock_sync,
    )
    driver = ThreadDriver(engine, wake)
    outbox.start()
    app.extensions["pdn.display"] = service
    # The first tick shows what should show now (idle on a new display): wait for it, so
    # tests start from a settled screen.
    wait_until(
        lambda: service.engine.status().idle or service.engine.status().current is not None,
        5,
        "the engine settled",
        step=0.005,
    )
    return Display(server.url, service, store, outbox, renderer, config, data_dir, driver, playback)


def close_display(display: Display) -> None:
    display.driver.stop()
    display.playback_record.close()
    display.outbox.stop()
    display.store.close()


@pytest.fixture
def make_display(
    display_server: tuple[Flask, WsgiServer], tmp_path: Path
) -> Iterator[Callable[..., Display]]:
    """Build a display (optionally with config fields set); closed after the test."""
    app, server = display_server
    made: list[Display] = []

    def make(data_dir: Path | None = None, **settings: Any) -> Display:
        config = DisplayConfig(timezone="UTC", **settings)
        display = build_display(app, server, data_dir or tmp_path / f"data{len(made)}", config)
        made.append(display)
        return display

    yield make
    for display in made:
        close_display(display)


@pytest.fixture
def display(make_display: Callable[..., Display]) -> Display:
    return make_display(name="Lobby", location={"latitude": "N54.0104", "longitude": "W2 47.22"})


def cds(name: str, *urls: str, extra: str = "", priority: str | None = None) -> bytes:
    """A small CDS with one item per URL."""
    constraints = ""
    if priority or extra:
        level = f'<priority level="{priority}"/>' if priority else ""
        constraints = (
            f"<constraints><scheduling-constraints>{level}{extra}"
            "</scheduling-constraints></constraints>"
        )
    items = "".join(
        f'<content-item content-type="text/html"><requires-file><sources><uri>{url}</uri>'
        "</sources></requires-file></content-item>"
        for url in urls
    )
    return f'<content-set name="{name}" type="inline">{constraints}{items}</content-set>'.encode()


class Screen(SourceClients):
    """One display under test, closed or open, and clients from chosen source addresses."""

    def __init__(
        self, display: Display, security: DisplaySecurity, port: int, scheme: str = "http"
    ) -> None:
        super().__init__(f"{scheme}://127.0.0.1:{port}")
        self.display = display
        self.security = security
        self.extra: dict[str, Any] = {}

    def code(self) -> str:
        assert self.security.pairing is not None
        return self.security.pairing.current_code()[0]

    def pair(self, name: str, source: str = "127.0.0.9") -> str:
        answer = self.client(source).post("/x/pair", json={"code": self.code(), "name": name})
        assert answer.status_code == 201, answer.text
        token: str = answer.json()["token"]
        return token


@pytest.fixture
def make_screen(tmp_path: Path) -> Iterator[Callable[..., Screen]]:
    made: list[tuple[Screen, WsgiServer]] = []

    def make(host: str = "0.0.0.0", tls: bool = False, **settings: Any) -> Screen:
        data_dir = tmp_path / f"data{len(made)}"
        data_dir.mkdir()
        from player.app import tls_setup  # the product's own (it loads Qt: imported late)

        config = DisplayConfig(timezone="UTC", tls=tls, **settings)
        security = DisplaySecurity(pairing=Pairing(data_dir))
        placeholder: Any = type("Placeholder", (), {"api_token": None})()
        app = create_app(placeholder, security)
        served = tls_setup(config, data_dir)  # a self-signed certificate in the data directory
        if served is not None:
            security.tls_fingerprint = served[1]
        context = served[0] if served is not None else None
        server = WsgiServer(app, host, 0, name="secure-display", tls=context).start()
        # As player.app decides it: from the address the socket is bound to.
        security.beyond_loopback = not is_loopback(server.host)
        display = build_display(app, server, data_dir, config)
        screen = Screen(display, security, server.port, "https" if tls else "http")
        screen.extra = {"app": app, "server": server}
        made.append((screen, server))
        return screen

    yield make
    for screen, server in made:
        screen.close()
        screen.extra["server"].stop()
        server.stop()
        close_display(screen.display)
        assert screen.security.pairing is not None
        screen.security.pairing.close()
