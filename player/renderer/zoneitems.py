"""The native items of a zone that are neither pictures, videos nor pages: a news ticker and a
clock, each a small ``QObject`` whose Qt properties a QML file of ``qml/`` shows.

How a region shows one (the integration contract):

- **A ticker** (a CDS item of type ``application/rss+xml``, ``application/atom+xml`` or
  ``text/plain``): make ``ticker = Ticker(speed=options.ticker_speed)`` on the GUI thread
  (``[screen] ticker-speed``, px/s for a bar 108 px high; :data:`DEFAULT_TICKER_SPEED`), then
  either ``ticker.follow(FeedSpec(uri, content_type, refresh_seconds(refresh)), data_dir)``
  (a feed or a ``data:`` URI, from ``player.feeds``: read off the GUI thread by a
  :class:`~player.feeds.FeedReader`, its lines queued to this object; the URI's origin is
  the caller's to check first, as for any item) or ``ticker.set_lines([...])``. Create
  ``qml/Ticker.qml`` as a child of the zone's item with the initial property ``ticker``: it
  fills its parent and scrolls. New lines come in from the right once what is on screen has
  scrolled through. A ticker with no line yet (a feed not read yet and none stored) is a dark
  bar and is not painted; the reader's ``failures`` and ``lines`` say why.
- **A clock** (``application/x-pdn-clock``, URI ``pdn:clock?format=HH:mm``): make
  ``clock = Clock(clock_format(uri), time_zone)`` (``DisplayConfig.timezone``) and create
  ``qml/Clock.qml`` with the initial property ``clock``. Its text changes once a minute, or
  once a second when the format shows seconds, and nothing else redraws the scene for it.
- **Painted**: each object's ``painted`` signal is emitted once, when a frame holding its
  text has reached the window (the QML calls :meth:`ZoneItem.laidOut` with its window once
  its text is in the scene; two frames swapped after that, the text is on the screen).
- **The end**: :meth:`ZoneItem.close` stops what the object owns (the ticker's feed thread,
  the clock's timer); destroy the QML item with it.

``Ticker.qml`` scrolls on the render loop (a ``FrameAnimation``: advanced once per frame by
the scene graph's animation driver, at the display's refresh rate; no Python runs per frame).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from PySide6.QtCore import Property as QtProperty
from PySide6.QtCore import (
    QByteArray,
    QDateTime,
    QLocale,
    QObject,
    Qt,
    QTimer,
    QTimeZone,
    Signal,
    Slot,
)
from PySide6.QtQuick import QQuickWindow

from cds.layouts import DEFAULT_CLOCK_FORMAT, clock_format
from player.feeds import FeedReader, FeedSpec

__all__ = [
    "DEFAULT_CLOCK_FORMAT",
    "DEFAULT_TICKER_SPEED",
    "REFERENCE_HEIGHT",
    "Clock",
    "Ticker",
    "ZoneItem",
    "clock_format",
]

#: Pixels a second for a ticker :data:`REFERENCE_HEIGHT` high (the bar of a 1080p main+ticker
#: layout); a bar of another height scrolls in proportion, as its text is sized by it.
DEFAULT_TICKER_SPEED = 120.0
REFERENCE_HEIGHT = 108.0
SEPARATOR = "\u2003\u2022\u2003"  # an em space, a bullet, an em space
_QUOTED = re.compile(r"'[^']*'")


class ZoneItem(QObject):
    """What the ticker and the clock share: the ``painted`` signal and :meth:`close`."""

    #: A frame showing the item's text has reached the window (emitted once).
    painted = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._window: QQuickWindow | None = None
        self._frames_left = 0
        self.is_painted = False

    @Slot(QObject)
    def laidOut(self, window: QObject | None) -> None:  # noqa: N802  (called by QML)
        """The QML item holds the text in its scene: ``painted`` follows two frames later
        (the first swapped may have been rendered before the text was synchronised)."""
        if self.is_painted or self._window is not None or not isinstance(window, QQuickWindow):
            return
        self._window = window
        self._frames_left = 2
        window.frameSwapped.connect(self._swapped)

    def _swapped(self) -> None:
        self._frames_left -= 1
        if self._frames_left > 0 or self._window is None:
            return
        self._window.frameSwapped.disconnect(self._swapped)
        self._window = None
        self.is_painted = True
        self.painted.emit()

    def close(self) -> None:
        if self._window is not None:
            self._window.frameSwapped.disconnect(self._swapped)
            self._window = None


class Ticker(ZoneItem):
    """A ticker's text (its lines joined by bullets) and speed, for ``qml/Ticker.qml``."""

    textChanged = Signal()  # noqa: N815  (a QML property's notify signal)
    speedChanged = Signal()  # noqa: N815
    # Lines read by a feed's worker thread, queued to this object's (the GUI) thread.
    _arrived = Signal(list)

    def __init__(self, speed: float = DEFAULT_TICKER_SPEED, parent: QObject | None = None) -> None:
        super().__init__(parent)
        if not speed > 0:
            raise ValueError(f"a ticker's speed must be positive, not {speed!r}")
        self._speed = float(speed)
        self._lines: list[str] = []
        self._text = ""
        self._reader: FeedReader | None = None
        self._arrived.connect(self.set_lines, Qt.ConnectionType.QueuedConnection)

    def follow(self, spec: FeedSpec, data_dir: Path | None = None) -> FeedReader:
        """Show the lines of ``spec``'s feed, read on a worker thread (the stored ones first)."""
        if self._reader is not None:
            self._reader.close()
        self._reader = FeedReader(spec, self._arrived.emit, data_dir=data_dir)
        self._reader.start()
        return self._reader

    @Slot(list)
    def set_lines(self, lines: list[str]) -> None:
        self._lines = [str(line) for line in lines]
        text = SEPARATOR.join(self._lines)
        if text != self._text:
            self._text = text
            self.textChanged.emit()

    @property
    def lines(self) -> list[str]:
        return list(self._lines)

    def _get_text(self) -> str:
        return self._text

    def _get_speed(self) -> float:
        return self._speed

    def _set_speed(self, speed: float) -> None:
        if speed > 0 and speed != self._speed:
            self._speed = float(speed)
            self.speedChanged.emit()

    #: The lines joined by bullets: one loop of the ticker ("" shows an empty bar).
    text = QtProperty(str, _get_text, notify=textChanged)
    #: Pixels a second at :data:`REFERENCE_HEIGHT`; Ticker.qml scales it by its height.
    speed = QtProperty(float, _get_speed, _set_speed, notify=speedChanged)

    def close(self) -> None:
        super().close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def shows_seconds(fmt: str) -> bool:
    """Whether a Qt date format shows seconds (or less): quoted text does not count."""
    bare = _QUOTED.sub("", fmt)
    return "s" in bare or "z" in bare


class Clock(ZoneItem):
    """The time in a time zone, in a Qt date format, for ``qml/Clock.qml``. Its text changes
    on the minute (on the second when the format shows seconds), by a timer it owns."""

    textChanged = Signal()  # noqa: N815

    def __init__(
        self,
        fmt: str = DEFAULT_CLOCK_FORMAT,
        time_zone: str = "UTC",
        *,
        now: Callable[[], datetime] | None = None,
        locale: QLocale | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {time_zone!r}") from error
        zone = QTimeZone(QByteArray(time_zone.encode()))
        if not zone.isValid():
            raise ValueError(f"Qt does not know the time zone {time_zone!r}")
        self.format = fmt
        self.time_zone = time_zone
        self._zone = zone
        self._now = now or (lambda: datetime.now(UTC))
        self._locale = locale or QLocale()
        self._step_ms = 1000 if shows_seconds(fmt) else 60_000
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        self.ticks = 0  # times the text was worked out
        self._text = ""
        self._tick()

    def text_at(self, when: datetime) -> str:
        moment = QDateTime.fromMSecsSinceEpoch(round(when.timestamp() * 1000), self._zone)
        return self._locale.toString(moment, self.format)

    def _tick(self) -> None:
        self.ticks += 1
        when = self._now()
        text = self.text_at(when)
        if text != self._text:
            self._text = text
            self.textChanged.emit()
        ms = round(when.timestamp() * 1000)
        # Just past the next boundary, so the text read then is the next one.
        self._timer.start(self._step_ms - ms % self._step_ms + 5)

    def _get_text(self) -> str:
        return self._text

    text = QtProperty(str, _get_text, notify=textChanged)

    def close(self) -> None:
        super().close()
        self._timer.stop()
