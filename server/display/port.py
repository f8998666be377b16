"""What the Display Segment's HTTP face needs of a display: a small interface, no insides.

The blueprint (``server.display.api``) validates requests and calls a :class:`DisplayPort`;
``player.display.Display`` implements it. Keeping the interface here lets the HTTP face be read,
tested and served without the engine, the store or Qt, and keeps the import arrows one way:
``player`` imports ``server``, never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Rejected:
    """A request understood but refused by the display's policy (still answered 202)."""

    reason: str


@dataclass(frozen=True)
class SensorMessage:
    """One ``POST /sensing`` message, validated: exactly one of ``data`` (``has_data``, which may
    be JSON null) and ``data_source`` is given; ``sensor_type`` may be left out after the first."""

    sensor_id: str
    sensor_type: str | None
    data: Any = None
    has_data: bool = False
    data_source: str | None = None


class UnknownSensorError(Exception):
    """A sensor's first reading named no sensor-type."""


class DisplayPort(Protocol):
    """The display as its HTTP API sees it. Every method is safe from any thread."""

    @property
    def api_token(self) -> str | None:
        """The bearer token changes need, or None when the API is open."""

    @property
    def protect_reads(self) -> bool:
        """True when reads (screenshot, health, everything) need the token too."""

    @property
    def accepts_cds(self) -> bool:
        """False: single items only; a CDS is refused with 415."""

    def info(self) -> dict[str, Any]:
        """``GET /``: location, sensors link, and the name when one is set."""

    def request_item(
        self, url: str, duration: float | None, zone: str | None = None
    ) -> Rejected | None:
        """Queue one content item, in the main zone or in ``zone`` (already checked against
        the zone-name grammar); a :class:`Rejected` says why not (a zone the screen does not
        have now, among others)."""

    def apply_cds(self, data: bytes) -> str:
        """Add, replace or remove a CDS; raises ``cds.errors.CdsError``, changing nothing."""

    def record_sensing(self, message: SensorMessage) -> None:
        """Keep a reading; raises :class:`UnknownSensorError` when a new sensor names no type."""

    def sensors(self) -> list[dict[str, str]]:
        """``GET /sensing``: every sensor known here, with its type."""

    def playback_json(self) -> bytes:
        """The playback record, encoded as ``GET /playback/`` sends it."""

    def playback_updates(self, after: int | None, timeout: float) -> list[tuple[int, bytes]]:
        """Playback records newer than sequence ``after``, as ``(sequence, encoded record)``,
        oldest first; waits up to ``timeout`` seconds for one and returns [] if none came.
        ``after=None`` (or a sequence too old to replay): the current record alone, at once."""

    def plays(self, since: int, limit: int, zone: str | None = None) -> dict[str, Any]:
        """``GET /x/plays``: ``{"plays": [...], "last-sequence": n}``, up to ``limit`` plays of
        the display's play log with a sequence above ``since`` (of ``zone`` only, when given),
        in sequence order."""

    def subscribe(self, uri: str, signing_secret: str | None = None) -> bool:
        """Subscribe ``uri`` to playback updates (idempotent), signed with ``signing_secret``
        (``whsec_...``, already checked) when one is given."""

    def unsubscribe(self, uri: str) -> bool:
        """False when ``uri`` was not subscribed."""

    def health(self) -> dict[str, Any]:
        """``GET /x/health``: ``status`` is ``"ok"`` or ``"degraded"``, with the reasons."""

    def screenshot(self, timeout: float = 5.0) -> bytes:
        """A PNG of the screen; raises TimeoutError, or RuntimeError when there is no screen."""
