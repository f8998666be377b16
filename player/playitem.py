"""The contract between the playlist engine (no Qt) and whatever draws the screen.

The engine decides *what* plays; a renderer decides *how* it reaches the pixels. The engine
never learns which renderer it talks to: it hands a :class:`PlayItem` to ``Renderer.show`` and
learns back, through a :class:`RendererListener`, when that item has really been painted (or
could not be). The playback record follows those reports, never the requests.

Threading: renderers call the listener on their own (GUI) thread; the engine is thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

Origin = Literal["request", "schedule", "idle"]


@dataclass(frozen=True)
class PlayItem:
    """One thing to put on screen, once.

    ``token`` is unique per play, so two plays of the same URL are told apart in reports.
    ``url`` is what the renderer loads: the content item's own http(s) URL, or a ``file://``
    URL of the verified copy in the content cache. ``source_url`` is the content item's URL as
    the request or the CDS named it (what the playback record reports).
    ``duration`` is seconds on screen; ``None`` means "the natural length of the video", which
    the renderer reports back in ``on_shown``.
    ``due`` is set for an item of a synchronised set (``cds.syncgrid``): the instant its turn
    on the grid begins. In the future, the renderer switches to it on that instant, not
    before (it is shown ahead, prepared); in the past (the display joins mid-item), it shows
    it at once, and a video starts at the offset of now into it, and keeps that offset.
    ``cut``: the screen changes to it at once, without the cross-fade (the CDS's
    ``<playback transition="cut">``).
    ``zone``: the zone of the screen it plays in (``player.zones``): ``"main"`` on a screen
    without a layout, and for the main zone of one.
    ``refresh``: how often a ticker's feed is read again, in seconds (its ``<uri refresh>``;
    None: the feed reader's default).
    """

    token: int
    url: str
    source_url: str
    content_type: str | None
    duration: float | None
    origin: Origin
    set_name: str | None = None
    priority: int = 2
    due: datetime | None = None
    cut: bool = False
    zone: str = "main"
    refresh: float | None = None


class RendererListener(Protocol):
    """What a renderer reports back. Called on the renderer's thread."""

    def item_shown(self, token: int, at: datetime, natural_duration: float | None) -> None:
        """The item is on screen now (its first frame has been painted)."""

    def item_failed(self, token: int, reason: str) -> None:
        """The item could not be shown (load error, timeout, undecodable video, crash)."""

    def item_ended(self, token: int) -> None:
        """The item finished by itself before its time was up (a video reached its end)."""

    def idle_shown(self, at: datetime) -> None:
        """The idle page (or its native stand-in) is on screen now."""


class Renderer(Protocol):
    """Draws PlayItems. Implementations: the Qt WebEngine kiosk (player.renderer)."""

    def set_listener(self, listener: RendererListener) -> None: ...

    def prepare(self, item: PlayItem) -> None:
        """A hint: this item is due soon; load it off-screen now so the swap is instant."""

    def show(self, item: PlayItem) -> None:
        """Put the item on screen as soon as it has painted, with no blank frame between;
        an item with a ``due`` instant in the future, on that instant."""

    def show_idle(self) -> None:
        """Nothing is eligible: show the idle page (name, addresses, API URL)."""
