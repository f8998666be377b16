"""Signed webhooks (Standard Webhooks 1.0): what the project sends, checked with the
``standardwebhooks`` package (not with the project's own code), on both outboxes."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from standardwebhooks import Webhook

from server.platform.net import shown_uri
from server.platform.signing import new_secret
from server.scheduler.service import SchedulerService
from tests.support.pages import PageServer, Request
from tests.support.scheduler import LOBBY, LOBBY_V2, lobby_folder, write
from tests.support.scheduler import start as start_scheduler
from tests.support.sensor import cpu_sensor
from tests.support.signed import signed_post
from tests.support.waiting import wait_until

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
MALFORMED = [
    "not-a-secret",
    "whsec_",
    "whsec_!!!!",
    "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short
    "whsec_" + base64.b64encode(b"x" * 65).decode(),  # too long
    12345,
]


def verified(secret: str, update: Request) -> bytes:
    """The update's body once standardwebhooks has verified it (it raises otherwise)."""
    Webhook(secret).verify(update.body, update.headers, json_parse=False)
    assert update.headers["webhook-id"] == update.headers["X-PDN-Event-Id"]
    return update.body


@pytest.fixture
def scheduler(
    tmp_path: Path, scheduler_backend: str, peer: PageServer
) -> Iterator[tuple[SchedulerService, Path]]:
    schedules = lobby_folder(tmp_path)
    service = start_scheduler(tmp_path, schedules)
    yield service, schedules
    service.stop()


def test_schedule_updates_are_signed_and_a_retry_keeps_its_id(
    scheduler: tuple[SchedulerService, Path], peer: PageServer
) -> None:
    service, schedules = scheduler
    subscribe = f"{service.url}/schedule/lobby/subscribe/"
    for bad in MALFORMED:
        answer = requests.post(
            subscribe,
            json={"subscriber-uri": f"{peer.url}/hook", "signing-secret": bad},
            timeout=5,
        )
        assert answer.status_code == 400, bad
        assert answer.json()["field"] == "signing-secret"
        assert "whsec_" in answer.json()["message"]
    peer.route("POST", "/hook", status=503)
    hook = {"subscriber-uri": f"{peer.url}/hook", "signing-secret": SECRET}
    assert requests.post(subscribe, json=hook, timeout=5).status_code == 201
    plain = {"subscriber-uri": f"{peer.url}/plain"}
    assert requests.post(subscribe, json=plain, timeout=5).status_code == 201
    write(schedules / "lobby.xml", LOBBY_V2)
    first = peer.wait_for(1, "/hook")[0]
    assert verified(SECRET, first) == LOBBY_V2
    peer.route("POST", "/hook", status=200)
    retried = peer.wait_for(2, "/hook", timeout=10)[1]
    assert verified(SECRET, retried) == LOBBY_V2
    assert retried.headers["webhook-id"] == first.headers["webhook-id"]
    unsigned = peer.wait_for(1, "/plain")[0]
    assert "webhook-signature" not in {name.lower() for name in unsigned.headers}
    # Subscribing again with another secret: the next update is signed with it.
    other = new_secret()
    hook["signing-secret"] = other
    assert requests.post(subscribe, json=hook, timeout=5).status_code == 201
    write(schedules / "lobby.xml", LOBBY)
    latest = wait_until(lambda: [u for u in peer.received("/hook") if u.body == LOBBY])[-1]
    assert verified(other, latest) == LOBBY
    # The refused requests subscribed nothing: two subscribers in all.
    assert {u.path for u in peer.received()} == {"/hook", "/plain"}


def test_sensor_updates_are_signed(tmp_path: Path, peer: PageServer) -> None:
    service = cpu_sensor(tmp_path)
    try:
        for bad in MALFORMED:
            answer = requests.post(
                f"{service.url}/subscribe",
                json={"subscriber-uri": f"{peer.url}/sensing", "signing-secret": bad},
                timeout=5,
            )
            assert answer.status_code == 400 and answer.json()["field"] == "signing-secret"
        hook = {"subscriber-uri": f"{peer.url}/sensing", "signing-secret": SECRET}
        assert requests.post(f"{service.url}/subscribe", json=hook, timeout=5).status_code == 201
        update = peer.wait_for(1, "/sensing")[0]
        assert b'"data":48.312' in verified(SECRET, update).replace(b" ", b"")
    finally:
        service.stop()


def test_the_scheduler_ingest_refuses_forged_stale_and_replayed_updates(
    scheduler: tuple[SchedulerService, Path],
) -> None:
    service, _schedules = scheduler
    display = "http://127.0.0.1:9"
    location = {"latitude": "N54.0104", "longitude": "W2.7883"}
    registered = requests.post(
        f"{service.url}/displays", json={"url": display, "location": location}, timeout=5
    )
    assert registered.status_code == 201
    ingest = wait_until(lambda: service._playback_subscriber(display))
    secret = service._playback_signing_secret(display)
    assert secret is not None
    update = {"sequence": 1, "origin": "idle", "started": "2030-01-01T00:00:00+00:00"}

    def stored() -> list[int]:
        answer = requests.get(f"{service.url}/x/plays", timeout=5).json()
        return [play["sequence"] for play in answer["plays"]]

    unsigned = requests.post(ingest, json=update, timeout=5)
    assert unsigned.status_code == 401 and unsigned.json()["error"] == "invalid-signature"
    forged = signed_post(ingest, update, new_secret())
    assert forged.status_code == 401 and forged.json()["error"] == "invalid-signature"
    stale = signed_post(ingest, update, secret, at=datetime.now(UTC) - timedelta(minutes=6))
    assert stale.status_code == 401 and "300 s" in stale.json()["message"]
    future = signed_post(ingest, update, secret, at=datetime.now(UTC) + timedelta(minutes=6))
    assert future.status_code == 401
    assert stored() == []
    assert signed_post(ingest, update, secret, event_id="evt-1").status_code == 200
    assert stored() == [1]
    # The same id again (a replay, even of another body): answered, and dropped.
    replay = {**update, "sequence": 2}
    assert signed_post(ingest, replay, secret, event_id="evt-1").status_code == 200
    assert stored() == [1]


def test_subscriber_uris_are_logged_without_their_secrets() -> None:
    assert shown_uri("http://10.0.0.9:8090/x/ingest/jy8eTZhyU2ePfhbcebPEN3Xe") == (
        "http://10.0.0.9:8090/x/ingest/***"
    )
    assert (
        shown_uri("https://ana:pw@hooks.example/in?key=abc") == "https://***@hooks.example/in?***"
    )
    assert shown_uri("http://10.0.0.5:8080/schedule") == "http://10.0.0.5:8080/schedule"
