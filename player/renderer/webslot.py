"""One recycled web view: loads an item behind the screen and says when it has really painted.

A slot goes BLANK -> LOADING -> READY (painted, still covered) -> SHOWN -> BLANK. "Painted" is
the page's own word for it: after ``loadFinished`` an isolated-world script waits a few
animation frames (the last runs only once a frame with the content has been produced) and
reports over the console channel, whose prefix carries a per-renderer secret so a page cannot
speak for the renderer. Our media pages (video) report the same way.

The view is recycled; its page is not. Every navigation gets a fresh ``QWebEnginePage`` and
every event handler is bound to the page it came from, so a load event, a channel message or a
crash of one navigation can never be taken for another's: a page replaced while still loading
goes on reporting to nobody. A fresh page also shows nothing of an earlier item (it starts
with no frame, in the views' UNPAINTED colour), and dropping a page ends its render process
(when no other page uses it), so a blank slot holds no document, no heap and no process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from enum import Enum

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QImage
from PySide6.QtWebEngineCore import (
    QWebEngineLoadingInfo,
    QWebEnginePage,
    QWebEngineProfile,
    QWebEngineScript,
)
from PySide6.QtWebEngineWidgets import QWebEngineView

from player.playitem import PlayItem
from player.renderer.content import Kind, image_page, video_page
from player.renderer.window import Stage

log = logging.getLogger("pdn.renderer")

ERR_ABORTED = -3  # net::ERR_ABORTED: a load we replaced ourselves
# What a view shows before its page's first frame reaches Qt: near black, but not a colour a
# page is likely to paint everywhere, so a view still showing only this has not painted.
UNPAINTED = QColor(1, 2, 3)
CONFIRM_INTERVAL_MS = 8
CONFIRM_ATTEMPTS = 25  # then a page that paints exactly UNPAINTED everywhere is taken as is
DROPPED_WARNING = 0.05  # a video that dropped more of its frames than this is logged as a warning


def sample_points(width: int, height: int) -> list[tuple[int, int]]:
    points = [(width * i // 4, height * j // 4) for i in (1, 2, 3) for j in (1, 2, 3)]
    return [*points, (1, 1), (width - 2, 1), (1, height - 2), (width - 2, height - 2)]


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
        max(QColor(pixel).red(), QColor(pixel).green(), QColor(pixel).blue()) < 16
        for pixel in pixels
    ):
        return "black"
    return "content"


class SlotState(Enum):
    BLANK = "blank"
    LOADING = "loading"
    READY = "ready"
    SHOWN = "shown"


class KioskPage(QWebEnginePage):
    """A page that never opens dialogs or windows and passes our channel's messages on."""

    # The JSON text after the channel prefix of a console message.
    channel_message = Signal(str)

    def __init__(self, profile: QWebEngineProfile, channel: str, parent: QObject) -> None:
        super().__init__(profile, parent)
        self._channel = channel

    def javaScriptConsoleMessage(  # noqa: N802
        self,
        level: QWebEnginePage.JavaScriptConsoleMessageLevel,
        message: str,
        line: int,
        source: str,
    ) -> None:
        if message.startswith(self._channel):
            self.channel_message.emit(message[len(self._channel) :])

    # A modal dialog on a public screen would block the page for ever: log and answer "no".
    def javaScriptAlert(self, origin: QUrl | str, message: str) -> None:  # noqa: N802
        log.info("page %s: alert suppressed: %.200s", QUrl(origin).toString(), message)

    def javaScriptConfirm(self, origin: QUrl | str, message: str) -> bool:  # noqa: N802
        log.info("page %s: confirm suppressed: %.200s", QUrl(origin).toString(), message)
        return False

    def javaScriptPrompt(  # type: ignore[override]  # noqa: N802
        self, origin: QUrl, message: str, default: str
    ) -> tuple[bool, str]:
        log.info("page %s: prompt suppressed: %.200s", origin.toString(), message)
        return False, ""


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


class WebSlot(QObject):
    """A web view on the stage, the page it shows and the item that page holds."""

    def __init__(
        self,
        name: str,
        profile: QWebEngineProfile,
        stage: Stage,
        channel: str,
        load_timeout: float,
    ) -> None:
        super().__init__(stage)
        # The slot has painted its item (still covered until raised): (slot).
        self.ready = Callbacks()
        # The slot's item cannot be shown: (slot, reason).
        self.failed = Callbacks()
        # The slot's video reached its end: (slot).
        self.ended = Callbacks()
        # The slot's render process died: (slot, description).
        self.crashed = Callbacks()
        self.name = name
        self._profile = profile
        self._stage = stage
        self._channel = channel
        self.state = SlotState.BLANK
        self.item: PlayItem | None = None
        self.kind = Kind.PAGE
        # One per navigation (and per clear): what the page's reports must carry.
        self.generation = 0
        self.natural_duration: float | None = None
        self.loads = 0  # loads since this view was made
        self.renewals = 0  # views replaced by fresh ones
        self.pages = 0  # pages made over the slot's life
        self.last_beat = time.monotonic()
        # Moved only by the page's own answers (and the swap): what the visual watchdog trusts.
        self.last_answer = self.last_beat
        # What the page looked like when it reported painted ("black", "content", ...).
        self.painted_as = "content"
        self._beat_pending = False
        self._timeout = QTimer(self)
        self._timeout.setSingleShot(True)
        self._timeout.setInterval(round(load_timeout * 1000))
        self._timeout.timeout.connect(self._timed_out)
        self.view = self._make_view()
        self._page = self._fresh_page()

    # -- the view and its page -------------------------------------------------------------

    def _make_view(self) -> QWebEngineView:
        view = QWebEngineView()
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.NoContextMenu)
        view.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        view.setCursor(Qt.CursorShape.BlankCursor)
        self._stage.add_layer(view)
        view.hide()  # until it has something to load (see clear())
        return view

    def _fresh_page(self) -> KioskPage:
        """A new page in the view, bound to this navigation; the old one is dropped (and with
        it its document, its heap and, unless another page shares it, its render process).
        Until something is loaded in it, a page has no render process at all."""
        old: KioskPage | None = getattr(self, "_page", None)
        page = KioskPage(self._profile, self._channel, self.view)
        page.setBackgroundColor(UNPAINTED)
        page.setAudioMuted(True)
        # Every handler is told which page spoke: an event of a dropped page is ignored.
        page.loadingChanged.connect(lambda info: self._loading_changed(page, info))
        page.channel_message.connect(lambda text: self._message(page, text))
        page.renderProcessTerminated.connect(
            lambda status, code: self._terminated(page, status, code)
        )
        self.view.setPage(page)
        self._page = page
        self._beat_pending = False  # an answer to a probe of the old page never comes
        self.pages += 1
        if old is not None:
            self._drop(old)
        return page

    @staticmethod
    def _drop(page: KioskPage) -> None:
        page.setAudioMuted(True)
        page.triggerAction(QWebEnginePage.WebAction.Stop)
        page.deleteLater()

    def renew_view(self) -> None:
        """Replace the view by a fresh one (whatever the old one accumulated goes with it)."""
        old = self.view
        self.view = self._make_view()
        self._fresh_page()
        self.loads = 0
        self.renewals += 1
        self._stage.stack.removeWidget(old)
        old.hide()
        old.deleteLater()
        log.debug("slot %s: view renewed", self.name)

    @property
    def page(self) -> KioskPage:
        return self._page

    def render_pid(self) -> int:
        return int(self._page.renderProcessPid())

    # -- loading --------------------------------------------------------------------------

    def _begin(self, item: PlayItem, kind: Kind) -> KioskPage:
        self.generation += 1
        self.item = item
        self.kind = kind
        self.state = SlotState.LOADING
        self.natural_duration = None
        self.loads += 1
        self._timeout.start()
        # Shown underneath whatever is on screen (its page must not be throttled), at the
        # stage's size now: a layout leaves hidden widgets out, and a page laid out for an
        # old size would report painted before the resize reaches it.
        self.view.setGeometry(self._stage.rect())
        self.view.show()
        return self._fresh_page()

    def load(self, item: PlayItem, kind: Kind, media_type: str) -> None:
        page = self._begin(item, kind)
        url = QUrl(item.url)
        if kind is Kind.VIDEO:
            page.setHtml(video_page(item.url, media_type, self._channel, self.generation), url)
        elif kind in (Kind.IMAGE, Kind.NATIVE_IMAGE):
            page.setHtml(image_page(item.url), url)
        else:
            page.setUrl(url)

    def load_html(self, html: str, base: QUrl, item: PlayItem) -> None:
        """A page of our own (the idle page)."""
        self._begin(item, Kind.PAGE).setHtml(html, base)

    def holds(self, item: PlayItem) -> bool:
        """Whether this slot holds (or is loading) the same content as ``item``."""
        return (
            self.item is not None
            and self.state in (SlotState.LOADING, SlotState.READY)
            and self.item.url == item.url
            and self.item.content_type == item.content_type
        )

    def start(self) -> None:
        """The slot is on top now: sound on, video playing."""
        self.state = SlotState.SHOWN
        self.last_beat = self.last_answer = time.monotonic()
        self._beat_pending = False
        self._page.setAudioMuted(False)
        if self.kind is Kind.VIDEO:
            self._page.runJavaScript("window.pdnPlay && window.pdnPlay();")

    def clear(self) -> None:
        """Forget the item and drop its page (its render process ends with it); the view is
        kept, hidden, with a fresh page that has loaded nothing, for the next item.

        Hidden, because Chromium gives even an empty page a render process as soon as it is
        in a visible view (measured: 30-50 MB PSS for nothing); a hidden view's fresh page has
        none until the next load shows the view again, underneath the one on screen."""
        self.generation += 1
        self.item = None
        self.state = SlotState.BLANK
        self._timeout.stop()
        self.view.hide()
        self._fresh_page()

    def _loading_changed(self, page: KioskPage, info: QWebEngineLoadingInfo) -> None:
        status = info.status()
        if page is not self._page or self.state is SlotState.BLANK:
            return
        log.debug(
            "slot %s (generation %d, %s): %s %.80s",
            self.name,
            self.generation,
            self.state.value,
            status.name,
            info.url().toString(),
        )
        if status in (
            QWebEngineLoadingInfo.LoadStatus.LoadStartedStatus,
            QWebEngineLoadingInfo.LoadStatus.LoadStoppedStatus,  # the timeout covers it
        ):
            return
        if status == QWebEngineLoadingInfo.LoadStatus.LoadFailedStatus:
            if info.errorCode() == ERR_ABORTED:
                return
            reason = f"{info.errorString() or 'load failed'} (code {info.errorCode()})"
            if info.errorDomain() == QWebEngineLoadingInfo.ErrorDomain.HttpStatusCodeDomain:
                reason = f"HTTP {info.errorCode()}"
            if self.state is SlotState.SHOWN:
                log.warning("slot %s: the page on screen went to an error: %s", self.name, reason)
            self._fail(f"{reason}: {info.url().toString()[:200]}")
            return
        if status == QWebEngineLoadingInfo.LoadStatus.LoadSucceededStatus and (
            self.state is SlotState.LOADING and self.kind is not Kind.VIDEO
        ):
            self._probe_painted()

    def _probe_painted(self) -> None:
        generation = self.generation
        # Three frames, not two: the frame with the content must also have reached Qt's side
        # of the compositor before the view is raised (measured: two left a rare black frame).
        report = (
            f"console.log({json.dumps(self._channel)} + "
            f"JSON.stringify({{generation: {generation}, event: 'painted'}}))"
        )
        frame = "requestAnimationFrame(() => {})"
        script = frame.format(frame.format(frame.format(report))) + ";"
        self._page.runJavaScript(script, QWebEngineScript.ScriptWorldId.ApplicationWorld)

    def probe_alive(self) -> None:
        """Ask the render process for a frame; the answer moves ``last_beat``."""
        if self._beat_pending:
            return
        self._beat_pending = True
        script = (
            "requestAnimationFrame(() => console.log("
            f"{json.dumps(self._channel)} + JSON.stringify({{generation: {self.generation}, "
            "event: 'alive'})));"
        )
        self._page.runJavaScript(script, QWebEngineScript.ScriptWorldId.ApplicationWorld)

    def _message(self, page: KioskPage, text: str) -> None:
        if page is not self._page:
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
        elif event == "painted" and self.state is SlotState.LOADING:
            duration = message.get("duration")
            if isinstance(duration, int | float) and duration > 0:
                self.natural_duration = float(duration)
            self._confirm_painted(generation, 0)
        elif event == "failed" and self.state is not SlotState.BLANK:
            self._fail(str(message.get("reason") or "the media could not be played"))
        elif event == "ended" and self.state is SlotState.SHOWN:
            self._log_frames(message)
            self.ended.emit(self)

    def _log_frames(self, message: dict[str, object]) -> None:
        """How many of the ended video's frames this machine could not present in time."""
        frames, dropped = message.get("frames"), message.get("dropped")
        if not isinstance(frames, int) or not isinstance(dropped, int) or frames <= 0:
            return
        url = self.item.url if self.item is not None else "?"
        share = dropped / frames
        level = logging.WARNING if share > DROPPED_WARNING else logging.INFO
        log.log(
            level,
            "video ended: %d of %d frames dropped (%.1f %%): %.200s",
            dropped,
            frames,
            share * 100,
            url,
        )

    def _confirm_painted(self, generation: int, attempt: int) -> None:
        """The page says it painted; wait until Qt's side of the view shows it too (a new
        page gets a new compositor view in Qt, whose first frame can lag the page)."""
        if generation != self.generation or self.state is not SlotState.LOADING:
            return
        if attempt < CONFIRM_ATTEMPTS and not self._shows_content():
            QTimer.singleShot(
                CONFIRM_INTERVAL_MS, lambda: self._confirm_painted(generation, attempt + 1)
            )
            return
        self._timeout.stop()
        self.state = SlotState.READY
        self.painted_as = classify_frame(self.view.grab().toImage())
        self.ready.emit(self)

    def _shows_content(self) -> bool:
        return classify_frame(self.view.grab().toImage()) not in ("unpainted", "empty")

    def _fail(self, reason: str) -> None:
        self._timeout.stop()
        self.failed.emit(self, reason)

    def _timed_out(self) -> None:
        if self.state is SlotState.LOADING:
            self._page.triggerAction(QWebEnginePage.WebAction.Stop)
            seconds = self._timeout.interval() / 1000
            self._fail(f"not painted within {seconds:g} s")

    def _terminated(
        self, page: KioskPage, status: QWebEnginePage.RenderProcessTerminationStatus, code: int
    ) -> None:
        if page is not self._page:
            return
        if status == QWebEnginePage.RenderProcessTerminationStatus.NormalTerminationStatus:
            return
        self._timeout.stop()
        self.crashed.emit(self, f"render process {status.name} (exit code {code})")

    def kill_render_process(self) -> None:
        """End a render process that stopped answering; Qt then reports it terminated."""
        pid = self.render_pid()
        if pid > 0:
            log.warning("slot %s: render process %d hangs: killing it", self.name, pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as error:
                log.warning("slot %s: cannot kill %d: %s", self.name, pid, error)
