"""``pdn ctl`` against displays and a scheduler on loopback: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.cli import main
from server.ctl.cli import EXIT_OK, EXIT_REFUSED, EXIT_UNEXPECTED, EXIT_UNREACHABLE, EXIT_USAGE
from tests.support.pages import PageServer
from tests.support.ports import free_port
from tests.support.scheduler import LOBBY

PLAYING = {
    "content-item": "http://example.org/a.html",
    "content-type": "text/html",
    "origin": "request",
    "set": None,
    "started": "2026-11-22T09:30:00+00:00",
    "duration": 30,
    "sequence": 7,
}


def test_schedule_a_url(peer: PageServer, capsys: pytest.CaptureFixture[str]) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    code = main(["ctl", "schedule", peer.url, "http://example.org/a.html", "--for", "2 minutes"])
    assert code == EXIT_OK
    sent = peer.received("/schedule")[0]
    assert sent.json() == {
        "content-item": "http://example.org/a.html",
        "preferred-duration": "2 minutes",
    }
    assert "scheduling" in capsys.readouterr().out


def test_schedule_a_cds_file(peer: PageServer, tmp_path: Path) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    path = tmp_path / "lobby.xml"
    path.write_bytes(LOBBY)
    assert main(["ctl", "schedule", peer.url, str(path)]) == EXIT_OK
    sent = peer.received("/schedule")[0]
    assert sent.body == LOBBY
    assert sent.headers["Content-Type"] == "text/xml"


def test_schedule_refused_and_rejected(
    peer: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "rejected", "reason": "queue full"})
    assert main(["ctl", "schedule", peer.url, "http://example.org/a"]) == EXIT_REFUSED
    assert "queue full" in capsys.readouterr().err
    peer.route("POST", "/schedule", 400, {"error": "invalid-field", "message": "bad item"})
    assert main(["ctl", "schedule", peer.url, "http://example.org/a"]) == EXIT_REFUSED
    assert "bad item" in capsys.readouterr().err
    peer.route("POST", "/schedule", 500, {"error": "internal-error", "message": "boom"})
    assert main(["ctl", "schedule", peer.url, "http://example.org/a"]) == EXIT_UNEXPECTED


def test_usage_errors(peer: PageServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ctl", "schedule", peer.url, "http://x/", "--for", "soon"]) == EXIT_USAGE
    assert main(["ctl", "schedule", peer.url, "/no/such/file.xml"]) == EXIT_USAGE
    assert main(["ctl", "schedule", "display-7", "http://x/"]) == EXIT_USAGE
    assert "pdn ctl:" in capsys.readouterr().err
    assert peer.received() == []


def test_unreachable_display(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ctl", "playing", f"http://127.0.0.1:{free_port()}"])  # nothing listens
    assert code == EXIT_UNREACHABLE
    assert "cannot reach" in capsys.readouterr().err


def test_playing(peer: PageServer, capsys: pytest.CaptureFixture[str]) -> None:
    peer.route("GET", "/playback/", 200, PLAYING)
    assert main(["ctl", "playing", peer.url]) == EXIT_OK
    line = capsys.readouterr().out
    assert "http://example.org/a.html" in line
    assert "#7" in line
    assert main(["ctl", "playing", peer.url, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == PLAYING


def test_playing_a_layout_names_each_zone(
    peer: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ticker = {**PLAYING, "content-item": "http://example.org/news.rss", "origin": "schedule"}
    ticker["set"] = "news"
    ticker.pop("sequence", None)
    main_zone = {k: v for k, v in PLAYING.items() if k != "sequence"}
    record = {
        **PLAYING,
        "layout": "lobby",
        "zones": {"main": main_zone, "ticker": ticker},
        "zone": "ticker",
    }
    peer.route("GET", "/playback/", 200, record)
    assert main(["ctl", "playing", peer.url]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert "http://example.org/a.html" in lines[0] and "#7" in lines[0]
    assert lines[1] == "  layout 'lobby', zone 'ticker' changed last"
    assert lines[2].startswith("  ticker: http://example.org/news.rss  [schedule 'news']")


def test_displays(peer: PageServer, capsys: pytest.CaptureFixture[str]) -> None:
    records = [
        {
            "url": "http://192.0.2.1:8080",
            "location": {"latitude": "N54.0104", "longitude": "W2.7883"},
            "name": "Lobby",
            "sensors": [{"sensor-id": "t1", "sensor-type": "air temperature"}],
        }
    ]
    peer.route("GET", "/displays", 200, records)
    assert main(["ctl", "displays", peer.url, "--full"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Lobby" in out
    assert "t1 (air temperature)" in out
    assert peer.received("/displays", method="GET")[0].path == "/displays?url-only=false"
