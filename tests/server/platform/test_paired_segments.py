"""The segments that push to a closed display carry a token of it, got by pairing, and pin its
certificate: the scheduler ("Add a display"), a sensor and a content server.

Real closed displays (listening on 0.0.0.0, serving HTTPS with a self-signed certificate, as
``install.sh`` sets one up) on their own waitress servers; a real scheduler, sensor and content
server, and the real ``pdn ctl pair``. Clients use loopback source addresses of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from server.content.app import BUILTIN_APPS
from server.content.service import ContentService
from server.platform.tls import ensure_certificate, server_context
from server.platform.wsgi import WsgiServer
from server.scheduler.service import SchedulerService
from server.sensor.source import FileSource
from tests.support.ctl import pdn_ctl
from tests.support.inprocess_display import Screen, cds
from tests.support.lan import OPERATOR, start_lan_scheduler
from tests.support.sensor import start as start_sensor
from tests.support.sensor import thermal_file
from tests.support.waiting import wait_until


@pytest.fixture
def scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SchedulerService]:
    monkeypatch.delenv("PDN_DATABASE_URL", raising=False)
    monkeypatch.delenv("PDN_DISPLAY_TOKEN", raising=False)
    lan = start_lan_scheduler(tmp_path / "scheduler", OPERATOR)
    yield lan.service
    lan.close()


def operator_client(service: SchedulerService) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{service.server.port}",
        transport=httpx.HTTPTransport(local_address="127.0.0.4"),
        headers={"Authorization": f"Bearer {OPERATOR}"},
        timeout=15,
    )


def sensors_of(screen: Screen) -> list[dict[str, str]]:
    """The display's GET /sensing (its certificate is not what this check is about)."""
    transport = httpx.HTTPTransport(local_address="127.0.0.5", verify=False)
    with httpx.Client(base_url=screen.url, transport=transport, timeout=10) as reader:
        found: list[dict[str, str]] = reader.get("/sensing").json()
    return found


def swap_certificate(screen: Screen, tmp_path: Path) -> None:
    """Another server with another certificate at the display's address (an impostor)."""
    port = int(screen.url.rsplit(":", 1)[1])
    screen.extra["server"].stop()
    other, key = ensure_certificate(tmp_path / "impostor", "127.0.0.1")
    screen.extra["server"] = WsgiServer(
        screen.extra["app"], "0.0.0.0", port, name="impostor", tls=server_context(other, key)
    ).start()


def test_the_scheduler_adds_a_display_by_its_code_and_pins_its_certificate(
    make_screen: Callable[..., Screen],
    scheduler: SchedulerService,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    screen = make_screen(tls=True, name="Lobby")
    pin = screen.security.tls_fingerprint
    code = screen.code()
    with operator_client(scheduler) as api:
        # A wrong code: refused, nothing stored; a wrong pin: refused before pairing.
        wrong = "ABCD-EFGH" if screen.code() != "ABCD-EFGH" else "HGFE-DCBA"
        refused = api.post("/x/displays/pair", json={"url": screen.url, "code": wrong})
        assert refused.status_code == 409 and refused.json()["error"] == "pairing-refused"
        bad_pin = {"url": screen.url, "code": screen.code(), "pin": "sha256:" + "0" * 64}
        mismatch = api.post("/x/displays/pair", json=bad_pin)
        assert mismatch.status_code == 409 and mismatch.json()["error"] == "certificate-changed"
        assert scheduler.storage.displays() == []
        # It registered before with a signing secret it no longer has (it was reinstalled):
        # pairing again replaces it, or the pushes below would be refused as wrongly signed.
        stale = {
            "url": screen.url,
            "location": {"latitude": "N1", "longitude": "E1"},
            "signing-secret": "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
        }
        assert api.post("/displays", json=stale).status_code == 201
        added = api.post("/x/displays/pair", json={"url": screen.url, "code": code})
        assert added.status_code == 201, added.text
        assert added.json() == {"display": screen.url, "state": "approved", "tls-fingerprint": pin}
        assert scheduler.storage.push_secret(screen.url) is None
        assert screen.security.pairing is not None
        names = [c["name"] for c in screen.security.pairing.controllers()]
        assert len(names) == 1 and names[0].startswith("scheduler@")
        listed = api.get("/displays").json()
        assert [(d["url"], d["name"]) for d in listed] == [(screen.url, "Lobby")]
        assert listed[0]["location"] == {"latitude": "N1", "longitude": "E1"}  # as registered
        # Its schedules are pushed with its token, over the pinned HTTPS.
        lobby = cds("lobby", "http://127.0.0.1:9/a")
        put = api.put("/x/schedules/lobby", content=lobby, headers={"Content-Type": "text/xml"})
        assert put.status_code == 201
        assign = api.post("/x/assignments", json={"schedule": "lobby", "display": screen.url})
        assert assign.status_code == 201
        wait_until(lambda: screen.display.service.document_names() == ["lobby"], timeout=15)
        # No secret in a log line or a health answer (the code is one once used).
        (token,) = scheduler.storage.push_tokens().values()
        answers = [
            api.get("/x/health").text,
            api.get("/x/fleet").text,
            api.get("/displays").text,
            httpx.get(f"{screen.url}/x/health", verify=False).text,
        ]
        for secret in (token, OPERATOR, code, code.replace("-", "")):
            assert not [r.getMessage() for r in caplog.records if secret in r.getMessage()]
            assert not [answer for answer in answers if secret in answer]
        # The certificate is swapped: the scheduler refuses it, nothing more arrives.
        swap_certificate(screen, tmp_path)
        api.request("DELETE", "/x/assignments", json={"schedule": "lobby", "display": screen.url})

        def refused_by_pin() -> bool:
            entry = api.get("/x/fleet").json()[0]
            error = entry["last-error"] or ""
            return entry["online"] is False and "Fingerprints did not match" in error

        scheduler.fleet_status.poke(screen.url)
        wait_until(refused_by_pin, timeout=20)
        assert screen.display.service.document_names() == ["lobby"]


def test_a_sensor_and_a_content_server_carry_the_token_paired_for_them(
    make_screen: Callable[..., Screen], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stranger is closed but on plain HTTP: what refuses it is its token check alone.
    paired, stranger = make_screen(tls=True), make_screen()
    config = tmp_path / "segment-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.delenv("PDN_DISPLAY_TOKEN", raising=False)
    monkeypatch.delenv("PDN_DISPLAYS_FILE", raising=False)
    result = pdn_ctl(
        "pair", paired.url, paired.code(), "--name", "sensors", unset=["PDN_API_TOKEN"]
    )
    assert result.returncode == 0, result.stderr
    reading = FileSource(thermal_file(tmp_path, "41500"), scale=0.001)
    sensor = start_sensor(
        tmp_path / "sensor", reading, "hall-temp", "temperature", interval=0.5, poll=0.05
    )
    # The paired display is in the pairing store; the stranger is listed with no token.
    content = ContentService([BUILTIN_APPS], host="127.0.0.1", port=0, displays=[stranger.url])
    try:
        content.start()
        content.server.start()
        for screen in (paired, stranger):
            answer = httpx.post(
                f"{sensor.url}/subscribe", json={"subscriber-uri": f"{screen.url}/sensing"}
            )
            assert answer.status_code == 201
        # The paired display takes the readings; the other refuses them (no token of its own).
        wait_until(lambda: sensors_of(paired) != [], timeout=15)
        assert sensors_of(paired)[0]["sensor-id"] == "hall-temp"
        assert sensors_of(stranger) == []
        request = {
            "application-params": {"text": "Welcome"},
            "requestor": {},
            "preferred-duration": "5 s",
        }
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.6")) as phone:
            forwarded = phone.post(
                f"{content.url}/message/schedule", json={**request, "display-uri": paired.url}
            )
            assert (
                forwarded.status_code == 202 and forwarded.json()["request-status"] == "forwarded"
            )
            failed = phone.post(
                f"{content.url}/message/schedule", json={**request, "display-uri": stranger.url}
            )
            assert failed.json()["request-status"] == "failed"
            assert "401" in failed.json()["reason"] and "paired" in failed.json()["reason"]
            unknown = phone.post(
                f"{content.url}/message/schedule",
                json={**request, "display-uri": "http://127.0.0.9:9"},
            )
            assert unknown.status_code == 403 and unknown.json()["error"] == "unknown-display"
            # The paired display's certificate is swapped: the content server refuses it.
            swap_certificate(paired, tmp_path)
            swapped = phone.post(
                f"{content.url}/message/schedule", json={**request, "display-uri": paired.url}
            )
            assert swapped.status_code == 504
            assert "Fingerprints did not match" in swapped.json()["message"]
    finally:
        content.stop()
        sensor.stop()


def test_pdn_ctl_add_display_pairs_the_scheduler_with_a_display(
    make_screen: Callable[..., Screen], scheduler: SchedulerService
) -> None:
    screen = make_screen()
    base = f"http://127.0.0.1:{scheduler.server.port}"
    result = pdn_ctl(
        "add-display", base, screen.url, screen.code(),
        env={"PDN_API_TOKEN": OPERATOR, "PDN_API_URL": base},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"paired with {screen.url}" in result.stdout
    # The token it got goes with what it pushes, and the code cannot be used again.
    assert scheduler.storage.push_tokens().keys() == {screen.url}
    with operator_client(scheduler) as api:
        lobby = cds("lobby", "http://127.0.0.1:9/a")
        api.put("/x/schedules/lobby", content=lobby, headers={"Content-Type": "text/xml"})
        api.post("/x/assignments", json={"schedule": "lobby", "display": screen.url})
        wait_until(lambda: screen.display.service.document_names() == ["lobby"], timeout=15)
        used = {"url": screen.url, "code": result.args[-1]}
        assert api.post("/x/displays/pair", json=used).status_code == 409


def test_the_consoles_add_a_display_pairs_with_it(
    make_screen: Callable[..., Screen], scheduler: SchedulerService
) -> None:
    screen = make_screen(tls=True)
    base = f"http://127.0.0.1:{scheduler.server.port}"
    transport = httpx.HTTPTransport(local_address="127.0.0.7")
    with httpx.Client(base_url=base, transport=transport, timeout=15) as browser:
        signed = browser.post("/console/signin", data={"token": OPERATOR, "next": "/console/"})
        assert signed.status_code == 302
        wrong = "ABCD-EFGH" if screen.code() != "ABCD-EFGH" else "HGFE-DCBA"
        refused = browser.post("/console/displays/add", data={"url": screen.url, "code": wrong})
        assert refused.status_code == 302 and "error=" in refused.headers["Location"]
        page = browser.get(refused.headers["Location"])
        assert "refused the pairing" in page.text
        assert scheduler.storage.displays() == []
        added = browser.post(
            "/console/displays/add", data={"url": screen.url, "code": screen.code()}
        )
        assert added.status_code == 302 and "added=" in added.headers["Location"]
        assert f"Paired with {screen.url}" in browser.get(added.headers["Location"]).text
    assert scheduler.storage.push_tokens().keys() == {screen.url}
    assert scheduler.storage.tls_pin(screen.url) == screen.security.tls_fingerprint
    display = scheduler.storage.display(screen.url)
    assert display is not None and not display.pending
