"""Closed beyond loopback: pairing, tokens, revocation and brute-force lock-outs.

A real display (engine, store, outbox) on a real waitress server listening on 0.0.0.0, as
``install.sh`` sets one up; clients connect from several loopback source addresses
(127.0.0.2, 127.0.0.3, ...), which the display sees as different client addresses.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from server.platform.lockout import Lockout
from server.platform.pairing import CODE_FILE, Pairing, read_code_file
from server.platform.tls import ensure_certificate, server_context
from server.platform.wsgi import WsgiServer
from tests.support.inprocess_display import Screen
from tests.support.process import PDN

ITEM = {"content-item": "http://example.org/page"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response: httpx.Response, status: int, error: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["error"] == error
    assert body["message"]
    return body


def test_unpaired_display_beyond_loopback_refuses_changes_and_answers_reads(
    make_screen: Callable[..., Screen],
) -> None:
    screen = make_screen()
    client = screen.client()
    refused = assert_error(client.post("/schedule", json=ITEM), 401, "not-paired")
    assert "pdn ctl pair" in refused["message"] and "/x/pair" in refused["message"]
    assert client.post("/schedule", json=ITEM).headers["WWW-Authenticate"].startswith("Bearer")
    cds = b'<content-set name="lobby"><content-item><requires-file><sources>'
    cds += b"<uri>http://example.org/a</uri></sources></requires-file></content-item>"
    cds += b"</content-set>"
    assert_error(
        client.post("/schedule", content=cds, headers={"Content-Type": "text/xml"}),
        401,
        "not-paired",
    )
    sensing = {"sensor-id": "t", "sensor-type": "temperature", "data": 20}
    assert_error(client.post("/sensing", json=sensing), 401, "not-paired")
    assert_error(
        client.post("/playback/subscribe/", json={"subscriber-uri": "http://127.0.0.1:9/"}),
        401,
        "not-paired",
    )
    assert_error(client.get("/x/pairings"), 401, "not-paired")
    # Nothing changed.
    assert screen.display.service.engine.queue_length() == 0
    assert screen.display.service.document_names() == []
    assert screen.display.service.sensors() == []
    # The spec's reads stay open.
    for path in ("/", "/sensing", "/playback/", "/playback"):
        assert client.get(path).status_code == 200, path
    assert client.get("/").json()["sensors"] == {"url": "sensing"}


def test_loopback_only_stays_open(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen(host="127.0.0.1")
    answer = screen.client().post("/schedule", json=ITEM)
    assert answer.status_code == 202
    assert answer.json() == {"request-status": "scheduling"}


def test_pairing_lockout_the_right_code_elsewhere_and_no_reuse(
    make_screen: Callable[..., Screen],
) -> None:
    screen = make_screen()
    code = screen.code()
    wrong = "ABCD-EFGH" if code != "ABCD-EFGH" else "HGFE-DCBA"
    guesser = screen.client("127.0.0.2")
    for _ in range(5):
        assert_error(
            guesser.post("/x/pair", json={"code": wrong, "name": "mallory"}), 403, "wrong-code"
        )
    # Locked out: even the right code is not looked at.
    locked = guesser.post("/x/pair", json={"code": code, "name": "mallory"})
    assert_error(locked, 429, "too-many-attempts")
    assert 50 <= int(locked.headers["Retry-After"]) <= 60
    # Another address is not affected, and the code may be typed loosely.
    loose = code.lower().replace("-", " ")
    paired = screen.client("127.0.0.3").post("/x/pair", json={"code": loose, "name": "ana"})
    assert paired.status_code == 201, paired.text
    token = paired.json()["token"]
    assert set(paired.json()) == {"token", "role"}  # no tls-fingerprint without TLS
    assert paired.json()["role"] == "control"
    # The token works from any address.
    answer = screen.client("127.0.0.4").post("/schedule", json=ITEM, headers=bearer(token))
    assert answer.status_code == 202 and answer.json() == {"request-status": "scheduling"}
    # The code was used up: a new one is shown (and written), the old one is refused.
    assert screen.code() != code
    assert_error(
        screen.client("127.0.0.5").post("/x/pair", json={"code": code, "name": "bob"}),
        403,
        "wrong-code",
    )
    names = screen.client("127.0.0.4").get("/x/pairings", headers=bearer(token)).json()
    assert [entry["name"] for entry in names] == ["ana"]


def test_code_file_is_private_and_matches_the_screen(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen()
    code = screen.code()
    path = screen.security.pairing.data_dir / CODE_FILE  # type: ignore[union-attr]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_code_file(path.parent)[0] == code
    assert len(code.replace("-", "")) == 8
    assert not set(code.replace("-", "")) & set("01ILO")
    shown = subprocess.run(
        [PDN, "display", "--pairing-code", "--data-dir", str(path.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == code
    screen.pair("ana")
    assert read_code_file(path.parent)[0] == screen.code() != code


def test_wrong_tokens_lock_out_that_address_only(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen()
    token = screen.pair("ana")
    guesser = screen.client("127.0.0.6")
    for attempt in range(10):
        assert_error(
            guesser.post("/schedule", json=ITEM, headers=bearer(f"pdn_guess{attempt}")),
            401,
            "not-paired",
        )
    locked = guesser.post("/schedule", json=ITEM, headers=bearer(token))
    assert_error(locked, 429, "too-many-attempts")
    assert int(locked.headers["Retry-After"]) > 0
    assert screen.client("127.0.0.7").post("/schedule", json=ITEM, headers=bearer(token)).is_success
    assert guesser.get("/playback/").status_code == 200  # free reads stay free


def test_several_controllers_and_revocation(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen()
    ana, bob = screen.pair("ana"), screen.pair("bob laptop")
    assert ana != bob
    client = screen.client()
    listed = client.get("/x/pairings", headers=bearer(bob))
    assert [entry["name"] for entry in listed.json()] == ["ana", "bob laptop"]
    assert all(set(entry) == {"name", "role", "paired"} for entry in listed.json())
    assert {entry["role"] for entry in listed.json()} == {"control"}
    assert client.delete("/x/pairings/ana", headers=bearer(bob)).json() == {}
    assert_error(client.post("/schedule", json=ITEM, headers=bearer(ana)), 401, "not-paired")
    assert client.post("/schedule", json=ITEM, headers=bearer(bob)).status_code == 202
    assert_error(client.delete("/x/pairings/ana", headers=bearer(bob)), 404, "not-paired")
    assert_error(client.delete("/x/pairings/bob%20laptop"), 401, "not-paired")
    # Pairing again under a name replaces that controller's token.
    again = screen.pair("bob laptop")
    assert_error(client.post("/schedule", json=ITEM, headers=bearer(bob)), 401, "not-paired")
    assert client.post("/schedule", json=ITEM, headers=bearer(again)).status_code == 202


def test_bad_pairing_requests_change_nothing(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen()
    client = screen.client()
    code = screen.code()
    assert_error(client.post("/x/pair", json={"name": "ana"}), 400, "invalid-field")
    assert_error(client.post("/x/pair", json={"code": code}), 400, "invalid-field")
    body = assert_error(
        client.post("/x/pair", json={"code": code, "name": "../etc"}), 400, "invalid-field"
    )
    assert body["field"] == "name"
    assert_error(client.post("/x/pair", json={"code": 12345678, "name": "a"}), 400, "invalid-field")
    json_type = {"Content-Type": "application/json"}
    assert_error(client.post("/x/pair", content=b"[1", headers=json_type), 400, "invalid-json")
    as_a_form = json.dumps({"code": code, "name": "ana"}).encode()
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    assert_error(
        client.post("/x/pair", content=as_a_form, headers=form_type), 415, "unsupported-media-type"
    )
    assert_error(
        client.post("/x/pair", json={"code": code, "name": "ana", "role": "root"}),
        400,
        "invalid-field",
    )
    # None of these was a guess, and none used the code up.
    assert screen.code() == code
    assert screen.security.codes.retry_after("127.0.0.2") is None
    assert screen.security.pairing.controllers() == []  # type: ignore[union-attr]


def test_api_token_still_works_beyond_loopback(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen(api_token="s3cret")
    client = screen.client()
    assert_error(client.post("/schedule", json=ITEM), 401, "unauthorized")
    assert client.post("/schedule", json=ITEM, headers=bearer("s3cret")).status_code == 202
    paired = screen.pair("ana")  # a paired controller alongside the configured token
    assert client.post("/schedule", json=ITEM, headers=bearer(paired)).status_code == 202


def test_protect_reads_needs_a_token_for_reads(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen(protect_reads=True)
    token = screen.pair("ana")
    client = screen.client()
    for path in ("/", "/playback/", "/sensing", "/x/health"):
        assert_error(client.get(path), 401, "not-paired")
    assert client.get("/playback/", headers=bearer(token)).status_code == 200


def test_tokens_are_stored_hashed_and_survive_a_restart(tmp_path: Path) -> None:
    pairing = Pairing(tmp_path)
    token = pairing.pair(pairing.current_code()[0], "ana")
    assert token is not None
    pairing.close()
    stored = sqlite3.connect(tmp_path / "pairings.db")
    rows = stored.execute("SELECT * FROM controllers").fetchall()
    stored.close()
    assert len(rows) == 1 and token not in repr(rows)
    for name in os.listdir(tmp_path):
        assert token.encode() not in (tmp_path / name).read_bytes(), name
    reopened = Pairing(tmp_path)
    found = reopened.authorise(token)
    assert found is not None and (found.name, found.role) == ("ana", "control")
    assert reopened.authorise(token + "x") is None
    reopened.close()


def test_codes_expire_and_are_renewed(tmp_path: Path) -> None:
    now = [1_000_000.0]
    pairing = Pairing(tmp_path, clock=lambda: now[0])
    first, expires = pairing.current_code()
    assert expires == now[0] + 15 * 60
    now[0] = expires
    assert pairing.pair(first, "ana") is None
    second, _ = pairing.current_code()
    assert second != first
    assert pairing.pair(second, "ana") is not None
    pairing.close()


def test_lockout_doubles_and_forgets_other_addresses() -> None:
    now = [0.0]
    guard = Lockout(limit=5, window=3600, first_wait=60, clock=lambda: now[0])
    waits = []
    for _ in range(3):
        for _ in range(4):
            assert guard.failed("10.0.0.1") is None
        waits.append(guard.failed("10.0.0.1"))
        assert guard.retry_after("10.0.0.2") is None
        now[0] += waits[-1] or 0
        assert guard.retry_after("10.0.0.1") is None
    assert waits == [60, 120, 240]
    guard.succeeded("10.0.0.1")
    for _ in range(5):
        last = guard.failed("10.0.0.1")
    assert last == 60
    bounded = Lockout(limit=2, window=60, max_addresses=3)
    for number in range(10):
        bounded.failed(f"10.0.1.{number}")
    assert len(bounded._records) == 3


def test_ctl_pair_keeps_the_token_and_uses_it(
    make_screen: Callable[..., Screen], tmp_path: Path
) -> None:
    screen = make_screen()
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("PDN_API_TOKEN", None)

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PDN, "ctl", *args], capture_output=True, text=True, timeout=60, check=False, env=env
        )

    refused = ctl("schedule", screen.url, "http://example.org/")
    assert refused.returncode == 1 and "pdn ctl pair" in refused.stderr
    wrong = ctl("pair", screen.url, "ABCD-EFGH" if screen.code() != "ABCD-EFGH" else "HGFE-DCBA")
    assert wrong.returncode == 1 and "403" in wrong.stderr
    paired = ctl("pair", screen.url, screen.code(), "--name", "ops desk")
    assert paired.returncode == 0, paired.stderr
    config = tmp_path / "config" / "pdn" / "ctl.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "token = " in config.read_text()
    scheduled = ctl("schedule", screen.url, "http://example.org/", "--for", "5 s")
    assert scheduled.returncode == 0, scheduled.stderr
    listed = ctl("pairings", screen.url)
    assert listed.returncode == 0 and "ops desk" in listed.stdout
    assert ctl("unpair", screen.url, "ops desk").returncode == 0
    assert ctl("schedule", screen.url, "http://example.org/").returncode == 1


def test_https_pairing_pins_the_certificate_and_a_swapped_one_is_refused(
    make_screen: Callable[..., Screen], tmp_path: Path
) -> None:
    screen = make_screen(tls=True)
    pin = screen.security.tls_fingerprint
    assert pin is not None and pin.startswith("sha256:")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("PDN_API_TOKEN", None)

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PDN, "ctl", *args], capture_output=True, text=True, timeout=60, check=False, env=env
        )

    wrong_pin = "sha256:" + "0" * 64
    refused = ctl("pair", screen.url, screen.code(), "--pin", wrong_pin)
    assert refused.returncode == 1 and "refusing to pair" in refused.stderr
    paired = ctl("pair", screen.url, screen.code(), "--pin", pin, "--name", "ops")
    assert paired.returncode == 0, paired.stderr
    kept = (tmp_path / "config" / "pdn" / "ctl.toml").read_text()
    assert f'tls-fingerprint = "{pin}"' in kept
    scheduled = ctl("schedule", screen.url, "http://example.org/")
    assert scheduled.returncode == 0, scheduled.stderr
    health = ctl("health", screen.url, "--json")
    assert f'"fingerprint": "{pin}"' in health.stdout
    # The display's certificate is replaced (another server, same address): refused.
    port = int(screen.url.rsplit(":", 1)[1])
    screen.extra["server"].stop()
    other, key = ensure_certificate(tmp_path / "other", "127.0.0.1")
    impostor = WsgiServer(
        screen.extra["app"], "0.0.0.0", port, name="impostor", tls=server_context(other, key)
    ).start()
    screen.extra["server"] = impostor
    swapped = ctl("schedule", screen.url, "http://example.org/")
    assert swapped.returncode == 1
    assert "not the one pinned when it was paired" in swapped.stderr


def test_a_screenshot_is_not_a_free_read_beyond_loopback(
    make_screen: Callable[..., Screen],
) -> None:
    """The idle page shows the pairing code: read off the screen by someone in front of it, not
    fetched over the network by anyone (no secret in a screenshot)."""
    screen = make_screen()
    anonymous = screen.client("127.0.0.2").get("/x/screenshot")
    assert_error(anonymous, 401, "not-paired")
    token = screen.pair("ops")
    paired = screen.client("127.0.0.3").get("/x/screenshot", headers=bearer(token))
    assert paired.status_code != 401  # 503 no-screen here: the test display has no window
    assert screen.client("127.0.0.2").get("/x/health").status_code in (200, 503)  # still free
    local = make_screen(host="127.0.0.1")
    assert local.client("127.0.0.2").get("/x/screenshot").status_code != 401
