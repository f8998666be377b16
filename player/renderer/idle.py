"""The idle page: the display's name, addresses, API URL and pairing code, for its installer.

The page is HTML from ``player/assets`` rendered in a web view. Should the web engine itself be
unable to draw (its render process dying), the stage's cover (``layers.Cover``) draws the same
facts natively, so the screen is never black.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtNetwork import QNetworkInterface

from player.renderer.guard import IDLE_BASE


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


def idle_html(
    name: str, api_url: str, ips: list[str], progress: str = "", pairing: str = ""
) -> str:
    template = (assets_dir() / "idle.html").read_text(encoding="utf-8")
    return (
        template.replace("{name}", escape(name or "pdn display"))
        .replace("{api_url}", escape(api_url or "not configured"))
        .replace("{addresses}", "<br>".join(escape(ip) for ip in ips) or "no network")
        .replace("{progress}", escape(progress))
        .replace("{pairing}", escape(pairing))
    )


def progress_script(progress: str) -> str:
    """JavaScript that puts ``progress`` on an idle page already shown."""
    return f"window.pdnIdleProgress && window.pdnIdleProgress({json.dumps(progress)});"


def pairing_script(pairing: str) -> str:
    """JavaScript that puts the pairing line on an idle page already shown."""
    return f"window.pdnIdlePairing && window.pdnIdlePairing({json.dumps(pairing)});"


def download_progress(status: dict[str, object]) -> str:
    """ "Downloading 3 of 5 files" while files the schedule needs are still coming, else ""."""
    wanted, ready = status.get("wanted"), status.get("ready")
    if not isinstance(wanted, int) or not isinstance(ready, int) or ready >= wanted:
        return ""
    return f"Downloading the schedule's files: {ready} of {wanted} ready"


def idle_base_url() -> QUrl:
    """The idle page's own origin (``guard.py``): its stylesheet is served from the assets, and
    no scheduled content can share the origin."""
    return QUrl(IDLE_BASE)
