"""Signed webhooks on the display: its playback updates are signed, and the signed
updates it receives (a schedule, sensor readings) are verified. Signatures are made and checked
with the ``standardwebhooks`` package, not with the project's own code."""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from standardwebhooks import Webhook

from player.app import tls_setup
from player.config import DisplayConfig
from player.follower import ScheduleFollower
from server.display import DisplaySecurity, create_app
from server.platform.pairing import Pairing
from server.platform.signing import load_or_make_secret, new_secret
from server.platform.wsgi import WsgiServer
from server.scheduler.service import SchedulerService
from tests.support.inprocess_display import Display, build_display, cds, close_display
from tests.support.peer import json_peer
from tests.support.signed import signed_post
from tests.support.waiting import wait_until

SECRET = "whsec_" + base64.b64encode(bytes(range(24))).decode()


def test_playback_updates_are_signed_and_a_retry_keeps_its_id(display: Display) -> None:
    peer = json_peer()
    try:
        for bad in ("whsec_short", "secret", "whsec_" + base64.b64encode(b"x" * 70).decode()):
            refused = display.post(
                "/playback/subscribe/",
                json={"subscriber-uri": f"{peer.url}/hook", "signing-secret": bad},
            )
            assert refused.status_code == 400 and refused.json()["field"] == "signing-secret"
        peer.route("POST", "/hook", status=503)
        hook = {"subscriber-uri": f"{peer.url}/hook", "signing-secret": SECRET}
        assert display.post("/playback/subscribe/", json=hook).status_code == 201
        display.post("/schedule", json={"content-item": "http://127.0.0.1:9/a"})
        first = peer.wait_for(1, "/hook")[0]
        peer.route("POST", "/hook", status=200)
        retried = peer.wait_for(2, "/hook")[1]
        for update in (first, retried):
            Webhook(SECRET).verify(update.body, update.headers, json_parse=False)
            assert update.headers["webhook-id"] == update.headers["X-PDN-Event-Id"]
        assert retried.headers["webhook-id"] == first.headers["webhook-id"]
        assert retried.body == first.body
    finally:
        peer.close()


@contextlib.contextmanager
def closed_display(
    data_dir: Path, *, tls: bool = False
) -> Iterator[tuple[Display, DisplaySecurity, str]]:
    """A display on 0.0.0.0 with its own signing secret, unpaired (over HTTPS with ``tls``, a
    self-signed certificate as player.app makes it)."""
    data_dir.mkdir()
    security = DisplaySecurity(
        pairing=Pairing(data_dir),
        beyond_loopback=True,
        webhook_secret=load_or_make_secret(data_dir / "webhook-secret"),
    )
    config = DisplayConfig(timezone="UTC", tls=tls)
    served = tls_setup(config, data_dir)
    if served is not None:
        security.tls_fingerprint = served[1]
    placeholder: Any = type("Placeholder", (), {"api_token": None})()
    app = create_app(placeholder, security)
    context = served[0] if served is not None else None
    server = WsgiServer(app, "0.0.0.0", 0, name="closed-display", tls=context).start()
    scheme = "https" if tls else "http"
    display = build_display(app, server, data_dir, config)
    try:
        yield display, security, f"{scheme}://127.0.0.1:{server.port}"
    finally:
        server.stop()
        close_display(display)
        assert security.pairing is not None
        security.pairing.close()


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[tuple[Display, DisplaySecurity, str]]:
    with closed_display(tmp_path / "closed") as made:
        yield made


def test_a_signed_schedule_needs_no_token_and_forgeries_are_refused(
    closed: tuple[Display, DisplaySecurity, str],
) -> None:
    display, security, url = closed
    secret = security.webhook_secret
    assert secret is not None
    xml = "text/xml"
    lobby = cds("lobby", "http://127.0.0.1:9/a")
    unsigned = requests.post(
        url + "/schedule", data=lobby, headers={"Content-Type": "text/xml"}, timeout=5
    )
    assert unsigned.status_code == 401 and unsigned.json()["error"] == "not-paired"
    forged = signed_post(url + "/schedule", lobby, new_secret(), content_type=xml)
    assert forged.status_code == 401 and forged.json()["error"] == "invalid-signature"
    old = datetime.now(UTC) - timedelta(minutes=6)
    stale = signed_post(url + "/schedule", lobby, secret, at=old, content_type=xml)
    assert stale.status_code == 401 and stale.json()["error"] == "invalid-signature"
    tampered = signed_post(
        url + "/schedule",
        lobby,
        secret,
        headers={"webhook-timestamp": str(int(time.time()) - 1)},
        content_type=xml,
    )
    assert tampered.status_code == 401
    assert display.service.document_names() == []
    good = signed_post(url + "/schedule", lobby, secret, event_id="evt-7", content_type=xml)
    assert good.status_code == 202 and good.json() == {"request-status": "scheduling"}
    assert display.service.document_names() == ["lobby"]
    # The same id again, even with another body: answered and dropped.
    other = cds("other", "http://127.0.0.1:9/b")
    replay = signed_post(url + "/schedule", other, secret, event_id="evt-7", content_type=xml)
    assert replay.status_code == 200
    assert display.service.document_names() == ["lobby"]
    # Sensor readings, the same way.
    reading = {"sensor-id": "t", "sensor-type": "temperature", "data": 21}
    assert signed_post(url + "/sensing", reading, new_secret()).status_code == 401
    assert display.service.sensors() == []
    assert signed_post(url + "/sensing", reading, secret).status_code == 200
    assert display.service.sensors() == [{"sensor-id": "t", "sensor-type": "temperature"}]


def test_a_closed_display_follows_its_scheduler_by_signed_pushes(
    closed: tuple[Display, DisplaySecurity, str], tmp_path: Path
) -> None:
    display, security, url = closed
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    (schedules / "lobby.xml").write_bytes(cds("lobby", "http://127.0.0.1:9/one"))
    scheduler = SchedulerService(data_dir=tmp_path / "scheduler", schedules_dir=schedules)
    scheduler.start()
    scheduler.server.start()
    follower = ScheduleFollower(
        apply_cds=display.service.apply_cds,
        display_url=lambda: url,
        state_dir=tmp_path / "follower",
        schedule_url=f"{scheduler.url}/schedule/lobby/",
        first_retry=0.1,
        poll_interval=60.0,
        signing_secret=security.webhook_secret,
    )
    try:
        follower.start()
        wait_until(lambda: display.service.document_names() == ["lobby"], timeout=10)
        # A change is pushed (signed) to the display's /schedule, which has no token to give.
        changed = cds("lobby", "http://127.0.0.1:9/two")
        (schedules / "lobby.xml").write_bytes(changed)
        wait_until(lambda: display.store.cds_documents()[0][1] == changed, timeout=10)
    finally:
        follower.stop()
        scheduler.stop()


def test_the_signing_secret_is_kept_private(tmp_path: Path) -> None:
    path = tmp_path / "webhook-secret"
    first = load_or_make_secret(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_or_make_secret(path) == first
    path.write_text("nonsense\n")
    with pytest.raises(ValueError):
        load_or_make_secret(path)


def test_a_closed_display_registered_with_its_scheduler_takes_its_assignments(
    closed: tuple[Display, DisplaySecurity, str], tmp_path: Path
) -> None:
    """register = URL: the display gives its secret in the registration; the scheduler signs
    the schedules it assigns, and the display, closed and unpaired, takes them."""
    display, security, url = closed
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    (schedules / "lobby.xml").write_bytes(cds("lobby", "http://127.0.0.1:9/one"))
    scheduler = SchedulerService(data_dir=tmp_path / "scheduler", schedules_dir=schedules)
    scheduler.start()
    scheduler.server.start()
    follower = ScheduleFollower(
        apply_cds=display.service.apply_cds,
        display_url=lambda: url,
        state_dir=tmp_path / "follower",
        register_url=scheduler.url,
        location={"latitude": "N54.0104", "longitude": "W2.7883"},
        first_retry=0.1,
        poll_interval=60.0,
        signing_secret=security.webhook_secret,
    )
    try:
        follower.start()
        wait_until(lambda: scheduler.storage.push_secret(url) == security.webhook_secret)
        assigned = requests.post(
            f"{scheduler.url}/x/assignments",
            json={"schedule": "lobby", "display": url},
            timeout=5,
        )
        assert assigned.status_code in (200, 201), assigned.text
        wait_until(lambda: display.service.document_names() == ["lobby"], timeout=10)
        # The scheduler subscribed to the display's playback with the token that goes with
        # that secret, and the display's signed updates reach its proof of play.
        wait_until(lambda: display.outbox.subscribers("playback") != [], timeout=10)

        def played() -> list[Any]:
            answer = requests.get(f"{scheduler.url}/x/plays", timeout=5).json()
            return [p for p in answer["plays"] if p["set"] == "lobby"]

        wait_until(lambda: bool(played()), timeout=15)
    finally:
        follower.stop()
        scheduler.stop()


def test_a_display_serving_https_is_pinned_by_its_scheduler(tmp_path: Path) -> None:
    """register = URL over HTTPS: the display gives its certificate's fingerprint; the
    scheduler pins it for its pushes and its reads, and refuses another certificate."""
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    (schedules / "lobby.xml").write_bytes(cds("lobby", "http://127.0.0.1:9/one"))
    scheduler = SchedulerService(data_dir=tmp_path / "scheduler", schedules_dir=schedules)
    scheduler.start()
    scheduler.server.start()
    try:
        with closed_display(tmp_path / "tls-display", tls=True) as (display, security, url):
            follower = ScheduleFollower(
                apply_cds=display.service.apply_cds,
                display_url=lambda: url,
                state_dir=tmp_path / "follower",
                register_url=scheduler.url,
                location={"latitude": "N54.0104", "longitude": "W2.7883"},
                first_retry=0.1,
                poll_interval=60.0,
                signing_secret=security.webhook_secret,
                tls_fingerprint=security.tls_fingerprint,
            )
            follower.start()
            try:
                wait_until(lambda: scheduler.storage.tls_pin(url) == security.tls_fingerprint)
                assigned = requests.post(
                    f"{scheduler.url}/x/assignments",
                    json={"schedule": "lobby", "display": url},
                    timeout=5,
                )
                assert assigned.status_code in (200, 201), assigned.text
                # Pushed over HTTPS, pinned, signed; and the proof-of-play subscription too.
                wait_until(lambda: display.service.document_names() == ["lobby"], timeout=10)
                wait_until(lambda: display.outbox.subscribers("playback") != [], timeout=10)
            finally:
                follower.stop()
        # Another certificate for the same URL is not taken without the display's secret.
        location = {"latitude": "N54.0104", "longitude": "W2.7883"}
        other = "sha256:" + "ab" * 32
        refused = requests.post(
            f"{scheduler.url}/displays",
            json={"url": url, "location": location, "tls-fingerprint": other},
            timeout=5,
        )
        assert refused.status_code == 409 and refused.json()["error"] == "certificate-changed"
        assert scheduler.storage.tls_pin(url) == security.tls_fingerprint
        moved = requests.post(
            f"{scheduler.url}/displays",
            json={
                "url": url,
                "location": location,
                "tls-fingerprint": other,
                "signing-secret": security.webhook_secret,
            },
            timeout=5,
        )
        assert moved.status_code == 201
        assert scheduler.storage.tls_pin(url) == other
    finally:
        scheduler.stop()
