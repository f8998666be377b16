"""One web view slot: loads an item behind the screen and says when it has really painted.

A slot goes BLANK -> LOADING -> READY (painted, still covered) -> SHOWN -> BLANK. "Painted" is
the page's own word for it: after the load succeeded an isolated-world script waits a few
animation frames (the last runs only once a frame with the content has been produced) and
reports over the console channel, whose prefix carries a per-renderer secret so a page cannot
speak for the renderer; then the slot waits for frames of the scene to be swapped with the view
in it (the page's frame has reached Qt Quick's side of the compositor). Videos are not web
content: they play natively (videolayer.py).

Every navigation gets a fresh ``WebView`` item (``qml/WebView.qml``) and every event handler is
bound to the item it came from, so a load event, a channel message or a crash of one
navigation can never be taken for another's: a view replaced while still loading goes on
reporting to nobody. A fresh view shows nothing of an earlier item (it starts with no frame,
in the UNPAINTED colour), and dropping it ends its render process (when no other view uses
it), so a blank slot holds no view, no document, no heap and no process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, QTimer, QUrl
from PySide6.QtGui import QColor, QImage
from PySide6.QtQuick import QQuickItem
from PySide6.QtWebEngineCore import QWebEngineLoadingInfo, QWebEnginePage

from player.framepoints import DARK, sample_points
from player.playitem import PlayItem
from player.renderer.content import Kind, image_page, local_path
from player.renderer.guard import GUARD_PROPERTY, ITEM_FILES
from player.renderer.stage import Stage

log = logging.getLogger("pdn.renderer")

ERR_ABORTED = -3  # net::ERR_ABORTED: a load we replaced ourselves
# A navigation refused by the request guard (guard.py) or by Chromium's Private Network Access.
REFUSED = (-20, -10)  # net::ERR_BLOCKED_BY_CLIENT, net::ERR_ACCESS_DENIED
# What a view shows before its page's first frame reaches Qt: near black, but not a colour a
# page is likely to paint everywhere, so a screen still showing only this has not painted.
UNPAINTED = QColor(1, 2, 3)
# Frames of the scene swapped after the page said it painted, before the slot is READY: the
# page's frame is handed to Qt's side of the compositor asynchronously, and the first swap may
# have been under way already when the report came.
CONFIRM_FRAMES = 2
# Frames a view replaced behind a still stays on the stage: the still copies it in the first and
# keeps the copy in the second (layers.Still); two more for frames already under way.
RETIRE_FRAMES = 4
_LOAD = QWebEngineLoadingInfo.LoadStatus
_STARTED, _STOPPED = _LOAD.LoadStartedStatus.value, _LOAD.LoadStoppedStatus.value
_SUCCEEDED, _FAILED = _LOAD.LoadSucceededStatus.value, _LOAD.LoadFailedStatus.value
_HTTP_STATUS = QWebEngineLoadingInfo.ErrorDomain.HttpStatusCodeDomain.value
_NORMAL_END = QWebEnginePage.RenderProcessTerminationStatus.NormalTerminationStatus.value
_END_NAMES = {status.value: status.name for status in QWebEnginePage.RenderProcessTerminationStatus}


def web_address(item: PlayItem, kind: Kind) -> str | None:
    """What the web engine loads for ``item``: its http(s) URL, a data: image as it is, or a
    verified copy of the content cache (a ``file:`` URL) through the display's own scheme, at
    an origin of its own (guard.py). Anything else (another file, javascript:, qrc:): None."""
    scheme = urlsplit(item.url).scheme.lower()
    if scheme in ("http", "https"):
        return item.url
    if scheme == "data" and kind in (Kind.IMAGE, Kind.NATIVE_IMAGE):
        return item.url
    if scheme == "file":
        return ITEM_FILES.publish(Path(local_path(item.url)), item.source_url, item.content_type)
    return None


def classify_frame(image: QImage) -> str:
    """What a grab shows, from 13 sample points: "empty" (no image), "unpainted" (only the
    views' background: no frame of a page), "black" (near black everywhere), else "content"."""
    width, height = image.width(), image.height()
    if width < 2 or height < 2:
        return "empty"
    pixels = [image.pixel(x, y) for x, y in sample_points(width, height)]
    if all(pixel == UNPAINTED.rgb() for pixel in pixels):
        return "unpainted"
    if all(
        max(QColor(pixel).red(), QColor(pixel).green(), QColor(pixel).blue()) < DARK
        for pixel in pixels
    ):
        return "black"
    return "content"


class SlotState(Enum):
    BLANK = "blank"
    LOADING = "loading"
    READY = "ready"
    SHOWN = "shown"


class Callbacks:
    """A plain-Python stand-in for a Qt signal carrying Python objects: a slot's events stay on
    the GUI thread anyway, so the calls stay in Python, synchronous, with no marshalling through
    Qt's meta-object system."""

    def __init__(self) -> None:
        self._receivers: list[Callable[..., None]] = []

    def connect(self, receiver: Callable[..., None]) -> None:
        self._receivers.append(receiver)

    def emit(self, *args: object) -> None:
        for receiver in list(self._receivers):
            receiver(*args)


class Views(Protocol):
    """Where a slot's views are made and dropped: its region's layer stack."""

    def create_view(self, properties: dict[str, object], own: bool = False) -> QQuickItem: ...
    def drop(self, item: QQuickItem) -> None: ...


class WebSlot(QObject):
    """A place for web content on the stage: the view of its current navigation, and the item
    that view holds."""

    def __init__(
        self,
        name: str,
        profile: QObject,
        stage: Stage,
        views: Views,
        channel: str,
        load_timeout: float,
    ) -> None:
        super().__init__()  # no Qt parent: Python owns it (see Stage.create)
        # The slot has painted its item (still covered until raised): (slot).
        self.ready = Callbacks()
        # The slot's item cannot be shown: (slot, reason).
        self.failed = Callbacks()
        # The slot's render process died: (slot, description).
        self.crashed = Callbacks()
        self.name = name
        self._profile = profile
        self._stage = stage
        self._views = views
        self._channel = channel
        # The window.pdn API of the views to come (kiosk.set_context keeps it current).
        self.context_script = ""
        self.state = SlotState.BLANK
        self.item: PlayItem | None = None
        self.kind = Kind.PAGE
        self.address = ""  # what the view of the item was sent to (web_address)
        # One per navigation (and per clear): what the page's reports must carry.
        self.generation = 0
        self.loads = 0  # navigations over the slot's life, each in a view of its own
        self.last_beat = time.monotonic()
        # Moved only by the page's own answers (and the swap): what the visual watchdog trusts.
        self.last_answer = self.last_beat
        # What the screen looked like the last time the watchdog saw this page answering.
        self.painted_as = "content"
        self._beat_pending = False
        self._confirming = -1  # frames still to swap before READY; -1: not confirming
        # Views replaced while a still of them was being taken: dropped after a frame.
        self._retiring: list[tuple[QQuickItem, int]] = []
        self.view: QQuickItem | None = None
        self._timeout = QTimer(self)
        self._timeout.setSingleShot(True)
        self._timeout.setInterval(round(load_timeout * 1000))
        self._timeout.timeout.connect(self._timed_out)

    # -- the view of each navigation ---------------------------------------------------------

    def _fresh_view(self, keep_old_for_a_frame: bool = False, own: bool = False) -> QQuickItem:
        """A new view for the next navigation, under every layer in front; the old one is
        dropped (and with it its document, its heap and, unless another view shares it, its
        render process). With ``keep_old_for_a_frame`` the old view stays on the stage until
        frames have been swapped (a still of it is being taken). ``own``: this panel's own
        page (the idle page), not laid out across a video wall."""
        self._drop_view(keep_old_for_a_frame)
        view = self._views.create_view(
            {
                "channel": self._channel,
                "contextScript": self.context_script,
                "profile": self._profile,
                "guard": self._profile.property(GUARD_PROPERTY),
            },
            own=own,
        )
        # Every handler is told which view spoke: an event of a dropped view is ignored.
        view.loadEvent.connect(  # type: ignore[attr-defined]
            lambda status, code, text, domain, url: self._loading_changed(
                view, status, code, text, domain, url
            )
        )
        view.channelMessage.connect(  # type: ignore[attr-defined]
            lambda text: self._message(view, text)
        )
        view.processEnded.connect(  # type: ignore[attr-defined]
            lambda status, code: self._terminated(view, status, code)
        )
        view.suppressed.connect(  # type: ignore[attr-defined]
            lambda what: log.info("slot %s: refused %s", self.name, what)
        )
        self.view = view
        self._beat_pending = False  # an answer to a probe of the old view never comes
        return view

    def _drop_view(self, after_a_frame: bool = False) -> None:
        view = self.view
        self.view = None
        if view is None:
            return
        view.setProperty("audioMuted", True)
        view.halt()  # type: ignore[attr-defined]  # QML
        if after_a_frame:
            self._retiring.append((view, self._stage.frames + RETIRE_FRAMES))
            self._stage.request_frame()
        else:
            self._views.drop(view)

    def front_item(self) -> QQuickItem | None:
        return self.view

    @property
    def confirming(self) -> bool:
        """The page said it painted; the slot waits for the scene's frames."""
        return self._confirming >= 0

    def render_pid(self) -> int:
        if self.view is None:
            return 0
        return int(self.view.property("renderProcessPid") or 0)

    def evaluate(self, script: str, answer: Callable[[str], None]) -> None:
        """Run ``script`` in the page's world and hand its result, as text, to ``answer``
        (once; nothing if the view goes first)."""
        view = self.view
        if view is None:
            return

        def once(result: str) -> None:
            view.evaluated.disconnect(once)  # type: ignore[attr-defined]
            answer(result)

        view.evaluated.connect(once)  # type: ignore[attr-defined]
        view.evaluate(script)  # type: ignore[attr-defined]  # QML

    def run_in_page(self, script: str) -> None:
        """Run ``script`` in the page's own world (context updates, the idle page)."""
        if self.view is not None:
            self.view.inPage(script)  # type: ignore[attr-defined]  # QML

    # -- loading --------------------------------------------------------------------------

    def _begin(
        self, item: PlayItem, kind: Kind, keep_old_for_a_frame: bool, own: bool = False
    ) -> QQuickItem:
        self.generation += 1
        self.item = item
        self.kind = kind
        self.state = SlotState.LOADING
        self._confirming = -1
        self.loads += 1
        self._timeout.start()
        # On the stage underneath whatever is on screen (its page must not be throttled), at
        # the content's size from the start (anchors).
        return self._fresh_view(keep_old_for_a_frame, own)

    def load(self, item: PlayItem, kind: Kind, keep_old_for_a_frame: bool = False) -> None:
        view = self._begin(item, kind, keep_old_for_a_frame)
        address = web_address(item, kind)
        if address is None:
            generation = self.generation
            reason = f"{item.url[:60]!r} is not an address web content is loaded from"

            def refuse() -> None:
                if self.generation == generation:
                    self._fail(reason)

            QTimer.singleShot(0, self, refuse)  # the slot's: it dies with it
            return
        url = QUrl(address)
        self.address = url.toString()
        if kind in (Kind.IMAGE, Kind.NATIVE_IMAGE):
            view.showHtml(image_page(address), url)  # type: ignore[attr-defined]  # QML
        else:
            view.setProperty("url", url)

    def load_html(
        self, html: str, base: QUrl, item: PlayItem, keep_old_for_a_frame: bool = False
    ) -> None:
        """A page of our own (the idle page): this panel's own, also on a video wall."""
        view = self._begin(item, Kind.PAGE, keep_old_for_a_frame, own=True)
        self.address = base.toString()
        view.showHtml(html, base)  # type: ignore[attr-defined]  # QML

    def holds(self, item: PlayItem) -> bool:
        """Whether this slot holds (or is loading) the same content as ``item``."""
        return (
            self.item is not None
            and self.state in (SlotState.LOADING, SlotState.READY)
            and self.item.url == item.url
            and self.item.content_type == item.content_type
        )

    def start(self) -> None:
        """The slot is in front now: sound on."""
        self.state = SlotState.SHOWN
        self.last_beat = self.last_answer = time.monotonic()
        self._beat_pending = False
        if self.view is not None:
            self.view.setProperty("audioMuted", False)

    def clear(self) -> None:
        """Forget the item and drop its view (its render process ends with it)."""
        self.generation += 1
        self.item = None
        self.state = SlotState.BLANK
        self._confirming = -1
        self._timeout.stop()
        self._drop_view()

    def close(self) -> None:
        """Stop everything the slot owns: no timer or view of it outlives the renderer."""
        self._timeout.stop()
        self._timeout.timeout.disconnect(self._timed_out)
        self.clear()
        for view, _ in self._retiring:
            self._views.drop(view)
        self._retiring.clear()

    def frame_swapped(self) -> None:
        """A frame of the scene reached the screen (the kiosk passes every one on)."""
        if self._retiring:
            frames = self._stage.frames
            for view, due in list(self._retiring):
                if frames >= due:
                    self._retiring.remove((view, due))
                    self._views.drop(view)
                else:
                    self._stage.request_frame()
        if self._confirming < 0 or self.state is not SlotState.LOADING:
            return
        self._confirming -= 1
        if self._confirming > 0:
            self._stage.request_frame()
            return
        self._confirming = -1
        self._timeout.stop()
        self.state = SlotState.READY
        self.ready.emit(self)

    def _loading_changed(
        self, view: QQuickItem, status: int, code: int, text: str, domain: int, url: str
    ) -> None:
        if view is not self.view or self.state is SlotState.BLANK:
            return
        log.debug(
            "slot %s (generation %d, %s): load status %d %.80s",
            self.name,
            self.generation,
            self.state.value,
            status,
            url,
        )
        if status in (_STARTED, _STOPPED):  # a stopped load: the timeout covers it
            return
        if status == _FAILED:
            if code == ERR_ABORTED:
                return
            if code in REFUSED and domain != _HTTP_STATUS and url != self.address:
                # The page tried to leave for somewhere it may not go: it stays as it is (and,
                # its own load cut short by the attempt, is shown as far as it got).
                log.info("slot %s: refused the page's navigation to %.200s", self.name, url)
                if self.state is SlotState.LOADING and self._confirming < 0:
                    self._probe_painted()
                return
            reason = f"{text or 'load failed'} (code {code})"
            if domain == _HTTP_STATUS:
                reason = f"HTTP {code}"
            if self.state is SlotState.SHOWN:
                log.warning("slot %s: the page on screen went to an error: %s", self.name, reason)
            self._fail(f"{reason}: {url[:200]}")
            return
        if status == _SUCCEEDED and self.state is SlotState.LOADING:
            self._probe_painted()

    def _probe_painted(self) -> None:
        # Three frames, not two: the frame with the content must also have left the render
        # process before the slot waits for the scene's own frames.
        report = (
            f"console.log({json.dumps(self._channel)} + "
            f"JSON.stringify({{generation: {self.generation}, event: 'painted'}}))"
        )
        frame = "requestAnimationFrame(() => {})"
        script = frame.format(frame.format(frame.format(report))) + ";"
        if self.view is not None:
            self.view.probe(script)  # type: ignore[attr-defined]  # QML

    def probe_alive(self) -> None:
        """Ask the render process for a frame; the answer moves ``last_beat``."""
        if self._beat_pending or self.view is None:
            return
        self._beat_pending = True
        script = (
            "requestAnimationFrame(() => console.log("
            f"{json.dumps(self._channel)} + JSON.stringify({{generation: {self.generation}, "
            "event: 'alive'})));"
        )
        self.view.probe(script)  # type: ignore[attr-defined]  # QML

    def _message(self, view: QQuickItem, text: str) -> None:
        if view is not self.view:
            return
        try:
            message = json.loads(text)
            generation = int(message["generation"])
            event = str(message["event"])
        except (ValueError, KeyError, TypeError):
            log.debug("slot %s: unreadable channel message %.100r", self.name, text)
            return
        if generation != self.generation:
            return
        if event == "alive":
            self._beat_pending = False
            self.last_beat = self.last_answer = time.monotonic()
        elif event == "painted" and self.state is SlotState.LOADING and self._confirming < 0:
            self._confirming = CONFIRM_FRAMES
            self._stage.request_frame()

    def _fail(self, reason: str) -> None:
        self._timeout.stop()
        self.failed.emit(self, reason)

    def _timed_out(self) -> None:
        if self.state is SlotState.LOADING:
            if self.view is not None:
                self.view.halt()  # type: ignore[attr-defined]  # QML
            seconds = self._timeout.interval() / 1000
            self._fail(f"not painted within {seconds:g} s")

    def _terminated(self, view: QQuickItem, status: int, code: int) -> None:
        if view is not self.view or status == _NORMAL_END:
            return
        self._timeout.stop()
        name = _END_NAMES.get(status, str(status))
        self.crashed.emit(self, f"render process {name} (exit code {code})")

    def kill_render_process(self) -> None:
        """End a render process that stopped answering; Qt then reports it terminated."""
        pid = self.render_pid()
        if pid > 0:
            log.warning("slot %s: render process %d hangs: killing it", self.name, pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as error:
                log.warning("slot %s: cannot kill %d: %s", self.name, pid, error)
