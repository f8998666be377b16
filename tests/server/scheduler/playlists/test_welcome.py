"""The one-box scheduler's first playlist (``--welcome GROUP``): made once at the first start
and assigned to the group; not made again after the operator deleted it, nor on a scheduler
that had schedules already (an upgrade)."""

from __future__ import annotations

from pathlib import Path

import requests

from tests.support.fleet import put_schedule
from tests.support.inprocess_display import cds
from tests.support.scheduler import start


def test_the_first_playlist_is_made_once(tmp_path: Path) -> None:
    service = start(tmp_path / "box", None, welcome_group="this-screen")
    base = service.url
    try:
        playlist = requests.get(f"{base}/x/playlists/welcome", timeout=5).json()
        assert playlist["name"] == "Welcome" and playlist["seconds"] == [60.0]
        sha = playlist["items"][0]["media"]
        item = requests.get(f"{base}/x/media/{sha}", timeout=5).json()
        assert (item["name"], item["type"], item["width"], item["height"]) == (
            "welcome.png", "image", 1920, 1080,
        )  # fmt: skip
        assert item["used-by"] == ["welcome"] and item["tags"] == ["welcome"]
        assigned = requests.get(f"{base}/x/assignments", timeout=5).json()
        assert assigned == [{"schedule": "welcome", "group": "this-screen"}]
        assert requests.delete(f"{base}/x/playlists/welcome", timeout=5).status_code == 204
    finally:
        service.stop()
    again = start(tmp_path / "box", None, welcome_group="this-screen")
    try:
        assert requests.get(f"{again.url}/x/playlists", timeout=5).json() == []
    finally:
        again.stop()


def test_an_upgraded_scheduler_gets_no_first_playlist(tmp_path: Path) -> None:
    service = start(tmp_path / "old", None)
    try:
        assert put_schedule(service.url, "lobby", cds("lobby", "http://127.0.0.1:9/a.html")).ok
    finally:
        service.stop()
    upgraded = start(tmp_path / "old", None, welcome_group="this-screen")
    try:
        assert requests.get(f"{upgraded.url}/x/playlists", timeout=5).json() == []
        assert (tmp_path / "old/data/welcome.done").exists()
    finally:
        upgraded.stop()
