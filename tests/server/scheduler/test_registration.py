"""Registration cannot be hijacked or squatted; pending records are capped and registrations
rate-limited per address.

Real schedulers on 0.0.0.0 with an operator and an enrolment token (as ``install.sh`` runs
them), on SQLite and on PostgreSQL; clients from several loopback source addresses. The display
is a real closed display (store, engine, outbox, pairing, its own signing secret) on its own
server, registering itself with the display's own follower: what it takes is what a signed
push from the scheduler brought it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from player.follower import ScheduleFollower
from server.platform.signing import new_secret, signed_headers
from tests.server.display.test_signed import closed_display
from tests.support.fleet import LOCATION
from tests.support.inprocess_display import cds
from tests.support.lan import ENROLMENT, Scheduler, assert_error, bearer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("scheduler_backend")

ELSEWHERE = {"latitude": "N51.5007", "longitude": "W0.1246"}
XML = {"Content-Type": "text/xml"}


def follower(
    tmp_path: Path, scheduler: Scheduler, display: object, url: str, secret: str, **extra: object
) -> ScheduleFollower:
    """The display's own registration, as ``register = URL`` in its config makes it."""
    return ScheduleFollower(
        apply_cds=display.service.apply_cds,  # type: ignore[attr-defined]
        display_url=lambda: url,
        state_dir=tmp_path / f"follower-{len(list(tmp_path.glob('follower-*')))}",
        register_url=scheduler.url,
        location=LOCATION,
        first_retry=0.1,
        poll_interval=60.0,
        signing_secret=secret,
        **extra,  # type: ignore[arg-type]
    )


def put_lobby(scheduler: Scheduler, item: str) -> None:
    xml = cds("lobby", item)
    answer = scheduler.operator("PUT", "/x/schedules/lobby", content=xml, headers=XML)
    assert answer.status_code in (201, 204), answer.text


def test_an_approved_display_is_not_rewritten_without_proof(
    make_scheduler: Callable[..., Scheduler], tmp_path: Path
) -> None:
    scheduler = make_scheduler()
    storage = scheduler.service.storage
    put_lobby(scheduler, "http://127.0.0.1:9/one")
    with closed_display(tmp_path / "display") as (display, security, url):
        secret = security.webhook_secret
        assert secret is not None
        own = follower(tmp_path, scheduler, display, url, secret, groups=["hall"])
        own.start()
        try:
            wait_until(lambda: storage.display(url) is not None)
            approved = scheduler.operator("POST", "/x/displays/approve", json={"display": url})
            assert approved.status_code == 200, approved.text
            assign = {"schedule": "lobby", "group": "hall"}
            assert scheduler.operator("POST", "/x/assignments", json=assign).status_code == 201
            wait_until(lambda: display.service.document_names() == ["lobby"])
        finally:
            own.stop()
        before = (storage.display(url), storage.push_secret(url), storage.tls_pin(url))
        assert storage.display_groups(url) == ["hall"]

        stranger = scheduler.client("127.0.0.9")
        same = {"url": url, "location": LOCATION, "groups": ["hall"]}
        attempts = [
            ({**same, "location": ELSEWHERE}, "proof-required", "location"),
            ({**same, "groups": ["hall", "casino"]}, "proof-required", "groups"),
            ({**same, "signing-secret": new_secret()}, "secret-changed", "signing-secret"),
            ({**same, "url": url + "/"}, "proof-required", "url"),
            (
                {**same, "tls-fingerprint": "sha256:" + "ab" * 32},
                "certificate-changed",
                "tls-fingerprint",
            ),
        ]
        for body, error, field in attempts:
            answer = stranger.post("/displays", json=body)
            assert "needs proof" in assert_error(answer, 409, error) or error != "proof-required"
            assert answer.json()["field"] == field
        # Signed, but with a secret of the stranger's own: no proof either.
        theirs = new_secret()
        forged = json.dumps({**same, "groups": ["casino"], "signing-secret": theirs}).encode()
        headers = {"Content-Type": "application/json", **signed_headers(theirs, "e1", forged)}
        assert_error(
            stranger.post("/displays", content=forged, headers=headers), 409, "proof-required"
        )
        # The same registration again without proof (as a display of the release before, at
        # every start): answered as before, and nothing changes.
        again = stranger.post("/displays", json=same)
        assert again.status_code == 201 and again.json() == {}
        assert (storage.display(url), storage.push_secret(url), storage.tls_pin(url)) == before
        assert storage.display_groups(url) == ["hall"]
        groups = scheduler.client("127.0.0.2").get("/x/groups").json()
        assert groups == [{"name": "hall", "displays": [url]}]

        # Pushes still reach it, signed with its own secret, which it verifies.
        put_lobby(scheduler, "http://127.0.0.1:9/two")
        wait_until(lambda: b"/two" in display.store.cds_documents()[0][1])

        # The display itself, started again with another group: its registration is signed
        # with its secret, so the change is taken.
        restarted = follower(tmp_path, scheduler, display, url, secret, groups=["hall", "foyer"])
        restarted.start()
        try:
            wait_until(lambda: storage.display_groups(url) == ["foyer", "hall"])
        finally:
            restarted.stop()
        assert storage.push_secret(url) == secret
        assert storage.display(url).pending is False  # type: ignore[union-attr]


def test_a_squatter_does_not_stop_the_real_display_enrolling(
    make_scheduler: Callable[..., Scheduler], tmp_path: Path
) -> None:
    scheduler = make_scheduler()
    storage = scheduler.service.storage
    put_lobby(scheduler, "http://127.0.0.1:9/one")
    assign = {"schedule": "lobby", "group": "hall"}
    assert scheduler.operator("POST", "/x/assignments", json=assign).status_code == 201
    with closed_display(tmp_path / "display") as (display, security, url):
        secret = security.webhook_secret
        assert secret is not None
        squat = {
            "url": url,
            "location": ELSEWHERE,
            "groups": ["casino"],
            "signing-secret": new_secret(),
            "tls-fingerprint": "sha256:" + "cd" * 32,
        }
        stranger = scheduler.client("127.0.0.9")
        first = stranger.post("/displays", json=squat)
        assert first.status_code == 201 and first.json()["state"] == "pending"
        # Without a token the real display cannot take the record over (nor is it changed)...
        unproven = scheduler.client("127.0.0.3").post(
            "/displays", json={"url": url, "location": LOCATION, "signing-secret": secret}
        )
        assert_error(unproven, 409, "proof-required")
        assert storage.display(url).location == ELSEWHERE  # type: ignore[union-attr]
        # ...with the enrolment token (scheduler_token in its config) it enrols, and the
        # stranger's secret, certificate and groups are gone.
        own = follower(tmp_path, scheduler, display, url, secret, groups=["hall"], token=ENROLMENT)
        own.start()
        try:
            wait_until(lambda: storage.push_secret(url) == secret)
            record = storage.display(url)
            assert record is not None and not record.pending and record.location == LOCATION
            assert storage.tls_pin(url) is None
            assert storage.display_groups(url) == ["hall"]
            wait_until(lambda: display.service.document_names() == ["lobby"])
        finally:
            own.stop()
        # The operator approving it afterwards changes nothing of it.
        approved = scheduler.operator("POST", "/x/displays/approve", json={"display": url})
        assert approved.status_code == 200 and approved.json()["state"] == "approved"
        # The squatter again: refused, the display's record stays.
        assert_error(stranger.post("/displays", json=squat), 409, "proof-required")
        assert storage.push_secret(url) == secret
        put_lobby(scheduler, "http://127.0.0.1:9/two")
        wait_until(lambda: b"/two" in display.store.cds_documents()[0][1])


def pending(scheduler: Scheduler) -> list[str]:
    return [d.url for d in scheduler.service.storage.displays() if d.pending]


def test_pending_records_are_capped_oldest_dropped(
    make_scheduler: Callable[..., Scheduler],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    scheduler_backend: str,
) -> None:
    monkeypatch.setenv("PDN_MAX_PENDING", "3")
    scheduler = make_scheduler()
    approved = {"url": "http://192.0.2.1:8080", "location": LOCATION}
    enrolled = scheduler.client("127.0.0.3").post(
        "/displays", json=approved, headers=bearer(ENROLMENT)
    )
    assert enrolled.status_code == 201
    with caplog.at_level(logging.WARNING, logger="pdn.scheduler.registration"):
        for n in range(2, 7):
            body = {"url": f"http://192.0.2.{n}:8080", "location": LOCATION}
            answer = scheduler.client(f"127.0.0.{10 + n}").post("/displays", json=body)
            assert answer.status_code == 201 and answer.json()["state"] == "pending"
    assert pending(scheduler) == [f"http://192.0.2.{n}:8080" for n in (4, 5, 6)]
    dropped = [r.getMessage() for r in caplog.records if "was dropped" in r.getMessage()]
    assert len(dropped) == 2 and "http://192.0.2.2:8080" in dropped[0]
    # The approved display is no pending record: it stays.
    listed = scheduler.client("127.0.0.2").get("/displays").json()
    assert [d["url"] for d in listed] == ["http://192.0.2.1:8080"]
    fleet = scheduler.client("127.0.0.2").get("/x/fleet").json()
    assert sorted(d["display"] for d in fleet) == [f"http://192.0.2.{n}:8080" for n in (1, 4, 5, 6)]
    if scheduler_backend != "postgresql":
        return
    # Two scheduler processes on one database, registering at once: the cap holds for both.
    other = make_scheduler()
    errors: list[str] = []

    def flood(target: Scheduler, source: str, first: int) -> None:
        for n in range(first, first + 10):
            body = {"url": f"http://198.51.100.{n}:8080", "location": LOCATION}
            answer = target.client(source).post("/displays", json=body)
            if answer.status_code != 201:
                errors.append(answer.text)

    threads = [
        threading.Thread(target=flood, args=(scheduler, "127.0.0.40", 1)),
        threading.Thread(target=flood, args=(other, "127.0.0.41", 101)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(pending(scheduler)) == 3 and pending(other) == pending(scheduler)


def test_registration_is_rate_limited_per_address(
    make_scheduler: Callable[..., Scheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDN_REGISTRATION_RATE", "3/60")
    scheduler = make_scheduler()
    flooder = scheduler.client("127.0.0.50")
    for n in range(3):
        body = {"url": f"http://192.0.2.{n}:8080", "location": LOCATION}
        assert flooder.post("/displays", json=body).status_code == 201
    body = {"url": "http://192.0.2.99:8080", "location": LOCATION}
    refused = flooder.post("/displays", json=body)
    assert "Too many registrations" in assert_error(refused, 429, "too-many-registrations")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert scheduler.service.storage.display("http://192.0.2.99:8080") is None
    # Another address is not affected; a display with the enrolment token is not limited so.
    assert scheduler.client("127.0.0.51").post("/displays", json=body).status_code == 201
    token = flooder.post(
        "/displays", json={**body, "url": "http://192.0.2.98:8080"}, headers=bearer(ENROLMENT)
    )
    assert token.status_code == 201 and token.json() == {}


def test_the_operator_adds_a_squatted_display_by_its_code(
    make_scheduler: Callable[..., Scheduler], tmp_path: Path
) -> None:
    """Without the enrolment token, the operator takes the display by the code on its screen:
    what the stranger gave with the pending record (secret, certificate, groups, location) is
    dropped, and pushes reach the display with the token the pairing gave."""
    scheduler = make_scheduler()
    storage = scheduler.service.storage
    put_lobby(scheduler, "http://127.0.0.1:9/one")
    assert (
        scheduler.operator(
            "POST", "/x/assignments", json={"schedule": "lobby", "group": "casino"}
        ).status_code
        == 201
    )
    with closed_display(tmp_path / "display") as (display, security, url):
        squat = {
            "url": url,
            "location": ELSEWHERE,
            "groups": ["casino"],
            "signing-secret": new_secret(),
        }
        assert scheduler.client("127.0.0.9").post("/displays", json=squat).status_code == 201
        assert security.pairing is not None
        code, _expires = security.pairing.current_code()
        added = scheduler.operator("POST", "/x/displays/pair", json={"url": url, "code": code})
        assert added.status_code == 201, added.text
        record = storage.display(url)
        assert record is not None and not record.pending and record.location != ELSEWHERE
        assert storage.push_secret(url) is None and storage.display_groups(url) == []
        assign = {"schedule": "lobby", "display": url}
        assert scheduler.operator("POST", "/x/assignments", json=assign).status_code == 201
        wait_until(lambda: display.service.document_names() == ["lobby"])
