"""The idle page: the display's name, its addresses and API URL, for whoever installs it.

The page is HTML from ``player/assets`` rendered in a web view. Should the web engine itself be
unable to draw (its render process dying), :class:`IdleCover` draws the same facts natively,
so the screen is never black.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QUrl
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPaintEvent
from PySide6.QtNetwork import QNetworkInterface
from PySide6.QtWidgets import QWidget


def addresses() -> list[str]:
    """The display's IP addresses (IPv4 first), loopback and link-local v6 left out."""
    found: list[str] = []
    for address in QNetworkInterface.allAddresses():
        if address.isLoopback() or address.isLinkLocal():
            continue
        text = address.toString().split("%")[0]
        if text and text not in found:
            found.append(text)
    return sorted(found, key=lambda text: ":" in text)


def assets_dir() -> Path:
    # Installed as package data next to this package (pyproject: player = ["assets/*"]).
    return Path(__file__).resolve().parent.parent / "assets"


def idle_html(name: str, api_url: str, ips: list[str], progress: str = "") -> str:
    template = (assets_dir() / "idle.html").read_text(encoding="utf-8")
    return (
        template.replace("{name}", escape(name or "pdn display"))
        .replace("{api_url}", escape(api_url or "not configured"))
        .replace("{addresses}", "<br>".join(escape(ip) for ip in ips) or "no network")
        .replace("{progress}", escape(progress))
    )


def progress_script(progress: str) -> str:
    """JavaScript that puts ``progress`` on an idle page already shown."""
    return f"window.pdnIdleProgress && window.pdnIdleProgress({json.dumps(progress)});"


def download_progress(status: dict[str, object]) -> str:
    """ "Downloading 3 of 5 files" while files the schedule needs are still coming, else ""."""
    wanted, ready = status.get("wanted"), status.get("ready")
    if not isinstance(wanted, int) or not isinstance(ready, int) or ready >= wanted:
        return ""
    return f"Downloading the schedule's files: {ready} of {wanted} ready"


def idle_base_url() -> QUrl:
    return QUrl.fromLocalFile(str(assets_dir()) + "/")


class IdleCover(QWidget):
    """The idle facts drawn by Qt: shown when no web view can be (a render process crash)."""

    def __init__(self, name: str, api_url: str) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._name = name or "pdn display"
        self._api_url = api_url

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        gradient = QLinearGradient(0, 0, self.width(), self.height())
        gradient.setColorAt(0, QColor("#16324a"))
        gradient.setColorAt(1, QColor("#275a73"))
        painter.fillRect(self.rect(), gradient)
        unit = max(8, min(self.width(), self.height()) // 100)
        margin = self.width() * 0.08
        width = self.width() - 2 * margin
        painter.setPen(QColor("#eef4f8"))
        font = QFont("DejaVu Sans")
        font.setPixelSize(unit * 8)
        painter.setFont(font)
        top = self.height() * 0.3
        painter.drawText(QRectF(margin, top, width, unit * 12), self._name)
        font.setPixelSize(unit * 3)
        painter.setFont(font)
        painter.setPen(QColor("#c9dde9"))
        lines = [f"Display API  {self._api_url}", "Addresses  " + ", ".join(addresses())]
        for row, line in enumerate(lines):
            painter.drawText(QRectF(margin, top + unit * (16 + 6 * row), width, unit * 5), line)
        painter.end()
