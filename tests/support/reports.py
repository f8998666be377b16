"""What a renderer reported to its listener (no Qt): shared by the renderer tests and the
benchmarks that drive a renderer in their own process."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Reports:
    """A RendererListener that records what the renderer reported."""

    shown: list[tuple[int, datetime, float | None]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    idle: list[datetime] = field(default_factory=list)

    def item_shown(self, token: int, at: datetime, natural_duration: float | None) -> None:
        self.shown.append((token, at, natural_duration))

    def item_failed(self, token: int, reason: str) -> None:
        self.failed.append((token, reason))

    def item_ended(self, token: int) -> None:
        self.ended.append(token)

    def idle_shown(self, at: datetime) -> None:
        self.idle.append(at)

    def shown_tokens(self) -> list[int]:
        return [token for token, _, _ in self.shown]

    def failed_tokens(self) -> list[int]:
        return [token for token, _ in self.failed]
