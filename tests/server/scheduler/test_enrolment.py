"""The scheduler beyond loopback: its operator token, pending displays, approval, and adding a
display by the code on its screen.

Real schedulers listen on 0.0.0.0, as ``install.sh`` runs them; clients connect from several
loopback source addresses (127.0.0.2, 127.0.0.3, ...), which the scheduler sees as different
client addresses. Displays are stand-ins recording what is pushed to them (``PageServer``), or
real closed displays (engine, store, outbox, pairing) on their own waitress server, over HTTPS.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from tests.support.ctl import pdn_ctl
from tests.support.fleet import LOCATION
from tests.support.lan import ENROLMENT, OPERATOR, Scheduler, assert_error, bearer
from tests.support.pages import PageServer
from tests.support.peer import json_peer
from tests.support.waiting import wait_until

LOBBY = b"""<?xml version="1.0" encoding="UTF-8"?>
<content-set name="lobby"><content-item content-type="text/html">
<requires-file><sources><uri>http://example.org/a</uri></sources></requires-file>
</content-item></content-set>
"""
pytestmark = pytest.mark.usefixtures("scheduler_backend")


def test_the_operator_token_guards_schedules_assignments_groups_and_broadcasts(
    make_scheduler: Callable[..., Scheduler],
) -> None:
    scheduler = make_scheduler()
    stranger = scheduler.client("127.0.0.2")
    xml = {"Content-Type": "text/xml"}
    refused = stranger.put("/x/schedules/lobby", content=LOBBY, headers=xml)
    assert "operator token" in assert_error(refused, 401, "unauthorized")
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="pdn scheduler"'
    wrong = stranger.put("/x/schedules/lobby", content=LOBBY, headers={**xml, **bearer("nope")})
    assert_error(wrong, 401, "unauthorized")
    assert 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
    # The enrolment token is a display's, not an operator's.
    enrolled = stranger.put(
        "/x/schedules/lobby", content=LOBBY, headers={**xml, **bearer(ENROLMENT)}
    )
    assert_error(enrolled, 401, "unauthorized")
    for method, path, body in (
        ("POST", "/x/assignments", {"schedule": "lobby", "group": "hall"}),
        ("POST", "/x/groups/hall/displays", {"display": "http://192.0.2.7:8080"}),
        (
            "POST",
            "/x/broadcasts",
            {"group": "hall", "content-item": "http://x.org/", "duration": 5},
        ),
        ("POST", "/x/displays/approve", {"display": "http://192.0.2.7:8080"}),
        ("POST", "/x/displays/pair", {"url": "http://192.0.2.7:8080", "code": "ABCD-EFGH"}),
    ):
        assert_error(stranger.request(method, path, json=body), 401, "unauthorized")
    assert (
        scheduler.operator("PUT", "/x/schedules/lobby", content=LOBBY, headers=xml).status_code
        == 201
    )
    # Reads stay open (unless protect_reads).
    assert stranger.get("/schedule/lobby/").status_code == 200
    assert stranger.get("/x/assignments").status_code == 200


def test_a_display_without_the_enrolment_token_waits_for_approval(
    make_scheduler: Callable[..., Scheduler], peer: PageServer
) -> None:
    scheduler = make_scheduler()
    scheduler.operator(
        "PUT", "/x/schedules/lobby", content=LOBBY, headers={"Content-Type": "text/xml"}
    )
    registration = {"url": peer.url, "location": LOCATION, "groups": ["hall"]}
    answer = scheduler.client("127.0.0.3").post("/displays", json=registration)
    assert answer.status_code == 201
    assert answer.json()["state"] == "pending"
    # Not in the registry, but in the fleet view, marked.
    assert scheduler.client("127.0.0.2").get("/displays").json() == []
    fleet = scheduler.client("127.0.0.2").get("/x/fleet").json()
    assert [(d["display"], d.get("pending")) for d in fleet] == [(peer.url, True)]
    assert fleet[0]["tls-fingerprint"] is None  # plain HTTP: no certificate to compare
    # Assigned, it still gets nothing, and is not subscribed to.
    assign = {"schedule": "lobby", "group": "hall"}
    assert scheduler.operator("POST", "/x/assignments", json=assign).status_code == 201
    time.sleep(2.5)  # two of the prober's rounds (refresh_interval 1 s) and the outbox's
    assert peer.received("/schedule") == []
    assert peer.received("/playback/subscribe/") == []
    # Nor read: a stranger's registration does not make the scheduler reach out to it.
    assert peer.received(method="GET") == []
    # A broadcast to its group has no display to go to.
    broadcast = {"group": "hall", "content-item": "http://example.org/news", "duration": "1 min"}
    assert_error(scheduler.operator("POST", "/x/broadcasts", json=broadcast), 404, "unknown-group")
    # An operator approves it: everything assigned is pushed at once.
    approved = scheduler.operator("POST", "/x/displays/approve", json={"display": peer.url})
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    pushed = peer.wait_for(1, "/schedule", timeout=10)
    assert b'name="lobby"' in pushed[0].body
    assert [d["url"] for d in scheduler.client("127.0.0.2").get("/displays").json()] == [peer.url]
    peer.wait_for(1, "/playback/subscribe/", timeout=10)
    unknown = scheduler.operator(
        "POST", "/x/displays/approve", json={"display": "http://192.0.2.9"}
    )
    assert_error(unknown, 404, "unknown-display")


def test_the_enrolment_token_admits_a_display_at_once_and_a_wrong_one_is_refused(
    make_scheduler: Callable[..., Scheduler], peer: PageServer
) -> None:
    scheduler = make_scheduler()
    registration = {"url": peer.url, "location": LOCATION}
    display = scheduler.client("127.0.0.3")
    wrong = display.post("/displays", json=registration, headers=bearer("not-the-token"))
    assert_error(wrong, 401, "unauthorized")
    assert scheduler.client("127.0.0.2").get("/x/fleet").json() == []
    answer = display.post("/displays", json=registration, headers=bearer(ENROLMENT))
    assert answer.status_code == 201 and answer.json() == {}
    assert [d["url"] for d in scheduler.client("127.0.0.2").get("/displays").json()] == [peer.url]
    # Registering again without the token (as at every start) keeps it approved...
    secret = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
    with_secret = {**registration, "signing-secret": secret}
    assert display.post("/displays", json=with_secret, headers=bearer(ENROLMENT)).status_code == 201
    assert display.post("/displays", json=with_secret).status_code == 201
    assert [d["url"] for d in scheduler.client("127.0.0.2").get("/displays").json()] == [peer.url]
    # ...but a stranger cannot swap the secret its pushes are signed with.
    other = {**registration, "signing-secret": "whsec_" + "WllYV1ZVVFNSUVBPTk1MS0pJSEdGRURD"}
    changed = scheduler.client("127.0.0.5").post("/displays", json=other)
    assert_error(changed, 409, "secret-changed")
    assert scheduler.service.storage.push_secret(peer.url) == secret


def test_wrong_tokens_lock_out_one_address_only(make_scheduler: Callable[..., Scheduler]) -> None:
    scheduler = make_scheduler()
    guesser = scheduler.client("127.0.0.5")
    for _ in range(10):
        assert guesser.post("/x/assignments", json={}, headers=bearer("guess")).status_code == 401
    locked = guesser.post("/x/assignments", json={}, headers=bearer(OPERATOR))
    assert_error(locked, 429, "too-many-attempts")
    assert int(locked.headers["Retry-After"]) >= 1
    # Registration too is refused to it, while it is locked out; others are not affected.
    registration = {"url": "http://192.0.2.7:8080", "location": LOCATION}
    assert guesser.post("/displays", json=registration).status_code == 429
    assert scheduler.client("127.0.0.6").post("/displays", json=registration).status_code == 201
    assert scheduler.operator("GET", "/x/assignments").status_code == 200


def test_beyond_loopback_without_an_operator_token_nothing_changes(
    make_scheduler: Callable[..., Scheduler], peer: PageServer
) -> None:
    scheduler = make_scheduler(token=None, enrolment=None)
    client = scheduler.client("127.0.0.2")
    refused = client.put("/x/schedules/lobby", content=LOBBY, headers={"Content-Type": "text/xml"})
    assert "PDN_API_TOKEN" in assert_error(refused, 401, "unauthorized")
    console = client.get("/console/")
    assert console.status_code == 401 and "PDN_API_TOKEN" in console.text
    answer = client.post("/displays", json={"url": peer.url, "location": LOCATION})
    assert answer.status_code == 201 and answer.json()["state"] == "pending"
    assert client.get("/displays").json() == []


def test_the_console_signs_in_with_the_operator_token_and_approves(
    make_scheduler: Callable[..., Scheduler], peer: PageServer
) -> None:
    scheduler = make_scheduler()
    scheduler.client("127.0.0.3").post("/displays", json={"url": peer.url, "location": LOCATION})
    browser = scheduler.client("127.0.0.7")
    assert browser.get("/console/").status_code == 302  # to the sign-in page
    for _ in range(10):
        wrong = browser.post("/console/signin", data={"token": "guess", "next": "/console/"})
        assert wrong.status_code == 401
    locked = browser.post("/console/signin", data={"token": OPERATOR, "next": "/console/"})
    assert "Too many wrong tokens" in locked.text and "pdn_console" not in locked.cookies
    browser = scheduler.client("127.0.0.8")
    signed = browser.post("/console/signin", data={"token": OPERATOR, "next": "/console/"})
    assert signed.status_code == 302 and "pdn_console" in signed.cookies
    page = browser.get("/console/")
    assert page.status_code == 200
    assert "waiting for approval" in page.text and "Add a display" in page.text
    assert browser.post("/console/displays/approve", data={"display": peer.url}).status_code == 302
    wait_until(lambda: scheduler.service.storage.display(peer.url).pending is False)  # type: ignore[union-attr]
    assert "waiting for approval" not in browser.get("/console/").text
    peer.wait_for(1, "/playback/subscribe/", timeout=10)


def test_pdn_ctl_lists_and_approves_a_waiting_display(
    make_scheduler: Callable[..., Scheduler], peer: PageServer
) -> None:
    scheduler = make_scheduler()
    scheduler.client("127.0.0.3").post("/displays", json={"url": peer.url, "location": LOCATION})
    env = {"PDN_API_TOKEN": OPERATOR, "PDN_API_URL": scheduler.url}

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return pdn_ctl(*args, env=env)

    # One serving HTTPS says which certificate it has: the operator compares it with its screen.
    pin = "sha256:" + "ab" * 32
    https = {"url": "https://192.0.2.50:8080", "location": LOCATION, "tls-fingerprint": pin}
    assert scheduler.client("127.0.0.5").post("/displays", json=https).status_code == 201
    listed = ctl("fleet", scheduler.url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("WAITING FOR APPROVAL") == 2
    assert f"WAITING FOR APPROVAL (pdn ctl approve), certificate {pin}" in listed.stdout
    approved = ctl("approve", scheduler.url, peer.url)
    assert approved.returncode == 0, approved.stderr
    assert scheduler.service.storage.display(peer.url).pending is False  # type: ignore[union-attr]
    peer.wait_for(1, "/playback/subscribe/", timeout=10)
    env["PDN_API_TOKEN"] = "wrong"
    refused = ctl("approve", scheduler.url, peer.url)
    assert refused.returncode != 0 and "operator token" in refused.stderr


def test_the_shared_display_token_goes_to_approved_displays_alone(
    make_scheduler: Callable[..., Scheduler], peer: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PDN_DISPLAY_TOKEN`` is a credential of the displays: a schedule's other subscriber (one
    that subscribed with the enrolment token) gets the same push with no token."""
    monkeypatch.setenv("PDN_DISPLAY_TOKEN", "shared-display-token")
    scheduler = make_scheduler()
    stranger = json_peer("127.0.0.9")
    try:
        xml = {"Content-Type": "text/xml"}
        assert scheduler.operator("PUT", "/x/schedules/lobby", content=LOBBY, headers=xml)
        registration = {"url": peer.url, "location": LOCATION, "groups": ["hall"]}
        enrolled = scheduler.client("127.0.0.3").post(
            "/displays", json=registration, headers=bearer(ENROLMENT)
        )
        assert enrolled.status_code == 201, enrolled.text
        subscribed = scheduler.client("127.0.0.5").post(
            "/schedule/lobby/subscribe/",
            json={"subscriber-uri": f"{stranger.url}/schedule"},
            headers=bearer(ENROLMENT),
        )
        assert subscribed.status_code == 201, subscribed.text
        assign = {"schedule": "lobby", "group": "hall"}
        assert scheduler.operator("POST", "/x/assignments", json=assign).status_code == 201
        (to_display,) = peer.wait_for(1, "/schedule", timeout=10)
        assert to_display.headers.get("Authorization") == "Bearer shared-display-token"
        # A subscriber hears of the schedule's next version.
        changed = LOBBY.replace(b"example.org/a", b"example.org/b")
        assert scheduler.operator("PUT", "/x/schedules/lobby", content=changed, headers=xml)
        (to_stranger,) = stranger.wait_for(1, "/schedule", timeout=10)
        assert b"example.org/b" in to_stranger.body
        assert "Authorization" not in to_stranger.headers
    finally:
        stranger.close()
