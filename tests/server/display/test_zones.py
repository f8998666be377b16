"""Zones at the Display Segment's API: a request's ``zone`` (checked, rejected with the reason
when the screen has no such zone, and kept across a restart), and a layout refused when its
zones could play more videos at once than ``[screen] video-zones``, through waitress on
loopback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from player.config import DisplayConfig
from player.screenconfig import ScreenConfig
from server.platform.wsgi import WsgiServer
from tests.server.display.test_api import JSON, XML, assert_error
from tests.support.inprocess_display import Display, build_display, close_display

VIDEO = (
    '<content-item content-type="video/mp4"><requires-file><sources>'
    "<uri>https://example.org/{0}.mp4</uri></sources></requires-file></content-item>"
)
PAGE = (
    '<content-item content-type="text/html"><requires-file><sources>'
    "<uri>https://example.org/{0}.html</uri></sources></requires-file></content-item>"
)
STREAM = (
    "<content-item><requires-file><sources>"
    "<uri>https://example.org/live/{0}.m3u8</uri></sources></requires-file></content-item>"
)


def layout(side: str) -> bytes:
    return f"""<?xml version="1.0"?>
<content-set name="lobby">
  <layout template="main+sidebar">
    <zone name="main" set="promos"/>
    <zone name="side" set="extra"/>
  </layout>
  <content-set name="promos">{VIDEO.format("promo")}</content-set>
  <content-set name="extra">{side}</content-set>
</content-set>""".encode()


def test_a_request_names_its_zone(display: Display) -> None:
    response = display.post(
        "/schedule", json={"content-item": "http://example.org/a", "zone": "main"}
    )
    assert response.status_code == 202
    assert response.json() == {"request-status": "scheduling"}
    display.wait_playback(lambda r: r["content-item"] == "http://example.org/a")
    shown = display.renderer.shown[-1]
    assert (shown.url, shown.zone) == ("http://example.org/a", "main")


def test_a_zone_the_screen_does_not_have_is_rejected_with_the_reason(display: Display) -> None:
    response = display.post(
        "/schedule", json={"content-item": "http://example.org/b", "zone": "ticker"}
    )
    assert response.status_code == 202
    body = response.json()
    assert body["request-status"] == "rejected"
    assert body["reason"] == (
        "the screen has no zone 'ticker' now: it plays full screen (zone 'main')"
    )
    assert display.service.engine.queue_length() == 0


@pytest.mark.parametrize("zone", ["Main", "", " ticker", "a" * 41, "ticker\n", 5, None, ["main"]])
def test_a_zone_that_is_not_a_zone_name_is_400(display: Display, zone: Any) -> None:
    response = display.post(
        "/schedule", json={"content-item": "http://example.org/c", "zone": zone}, headers=JSON
    )
    body = assert_error(response, 400, "invalid-field", "zone")
    assert "zone" in body["message"]


def test_a_layout_with_more_video_zones_than_the_display_plays_is_400(
    make_display: Callable[..., Display],
) -> None:
    pi = make_display(screen=ScreenConfig(video_zones=1))
    for side in (VIDEO.format("side"), STREAM.format("camera")):
        response = pi.post("/schedule", data=layout(side), headers=XML)
        body = assert_error(response, 400, "invalid-cds")
        assert body["line"] == 3  # the <layout>
        assert "set 'lobby'" in body["message"] and "2 videos at once" in body["message"]
        assert "zones main, side" in body["message"] and "video-zones" in body["message"]
    assert pi.service.document_names() == []  # nothing half-changed
    # A page in the side zone: one video at once, taken.
    response = pi.post("/schedule", data=layout(PAGE.format("side")), headers=XML)
    assert response.status_code == 202, response.text
    assert pi.service.document_names() == ["lobby"]
    # Where two videos may play at once, the video in the side zone is taken too.
    pc = make_display(screen=ScreenConfig(video_zones=2))
    response = pc.post("/schedule", data=layout(VIDEO.format("side")), headers=XML)
    assert response.status_code == 202, response.text


def test_a_wrong_layout_is_400_with_its_line(display: Display) -> None:
    wrong = b"""<content-set name="lobby">
  <layout template="main+ticker">
    <zone name="main" set="promos"/>
    <zone name="ticker" set="news" height="1.5"/>
  </layout>
  <content-set name="promos"><content-item><requires-file><sources>
    <uri>https://example.org/a.html</uri></sources></requires-file></content-item></content-set>
  <content-set name="news"><content-item><requires-file><sources>
    <uri>https://example.org/n.rss</uri></sources></requires-file></content-item></content-set>
</content-set>"""
    body = assert_error(display.post("/schedule", data=wrong, headers=XML), 400, "invalid-cds")
    assert body["line"] == 4
    assert "height must be a fraction of the screen from 0 to 1" in body["message"]


def test_a_request_to_a_zone_survives_a_restart(
    display_server: tuple[Flask, WsgiServer], tmp_path: Path
) -> None:
    """A request to the side zone, on screen when the display stops, is there again when it
    starts on the same data directory, with the time it had left; the main zone is not
    given it."""
    app, server = display_server
    alert = "http://example.org/alert.html"

    def start() -> Display:
        return build_display(app, server, tmp_path / "data", DisplayConfig(timezone="UTC"))

    display = start()
    try:
        assert display.post("/schedule", data=layout(PAGE.format("side")), headers=XML).ok
        request = {"content-item": alert, "preferred-duration": "600 s", "zone": "side"}
        answer = display.post("/schedule", json=request, headers=JSON)
        assert answer.json() == {"request-status": "scheduling"}, answer.text
        shown = display.wait_playback(
            lambda r: r["zones"].get("side", {}).get("content-item") == alert
        )
    finally:
        close_display(display)

    display = start()
    try:
        # The record kept from before the restart first, then the new one's.
        record = display.wait_playback(
            lambda r: (
                r["sequence"] > shown["sequence"]
                and r.get("layout") == "lobby"
                and "side" in r.get("zones", {})
            )
        )
        side = record["zones"]["side"]
        assert (side["content-item"], side["origin"]) == (alert, "request"), record
        assert 500 < side["duration"] < 600, side
        assert record["zones"]["main"]["content-item"] == "https://example.org/promo.mp4"
    finally:
        close_display(display)
