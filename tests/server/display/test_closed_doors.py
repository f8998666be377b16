"""What a web page, a guesser with many addresses and a token used beyond its role meet.

Real displays (engine, store, outbox) on real waitress servers; clients connect from several
loopback source addresses (127.0.0.X), which the display sees as different clients.
"""

from __future__ import annotations

import http.client
import logging
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from player.playback import PLAYBACK_TOPIC
from server.display.access import allowed_hosts
from server.platform.lockout import Lockout, client_key
from server.platform.pairing import CODE_FILE, CODE_TRIES, Pairing, read_code_file
from server.platform.signing import SeenIds, Verifier, new_secret, parse_secret, signed_headers
from tests.server.display.test_security import ITEM, assert_error, bearer
from tests.support.inprocess_display import Screen
from tests.support.process import PDN

JSON = {"Content-Type": "application/json"}


def open_screen(make_screen: Callable[..., Screen], names: tuple[str, ...] = ()) -> Screen:
    """A display on loopback, open (no token), with the Host check pdn display sets up."""
    screen = make_screen(host="127.0.0.1")
    port = screen.extra["server"].port
    screen.security.hosts = allowed_hosts("127.0.0.1", port, names=names)
    return screen


def unchanged(screen: Screen, sequence: int) -> None:
    """Nothing reached the screen or the storage."""
    assert screen.display.playback()["sequence"] == sequence
    assert screen.display.service.document_names() == []
    assert screen.display.outbox.subscribers(PLAYBACK_TOPIC) == []


# -- Browsers: bodies, Host, Origin ----------------------------------------------------------


BROWSER_BODIES = [
    ("application/x-www-form-urlencoded", b'{"content-item": "http://example.org/page"}'),
    ("text/plain", b'{"content-item": "http://example.org/page"}'),
    ("multipart/form-data; boundary=x", b"--x\r\n\r\n{}\r\n--x--\r\n"),
    (None, b'{"content-item": "http://example.org/page"}'),
    (None, b'<content-set name="a"/>'),
]


@pytest.mark.parametrize(("content_type", "body"), BROWSER_BODIES)
def test_bodies_a_page_can_send_are_refused_and_change_nothing(
    make_screen: Callable[..., Screen], content_type: str | None, body: bytes
) -> None:
    screen = open_screen(make_screen)
    client = screen.client("127.0.0.2")
    sequence = screen.display.playback()["sequence"]
    # A page's unlabelled body comes with the Origin every browser sends with a POST (its own
    # origin here, so that the body rule, not the origin rule, is what refuses it).
    own_origin = f"http://127.0.0.1:{screen.extra['server'].port}"
    headers = {"Content-Type": content_type} if content_type else {"Origin": own_origin}
    for path in ("/schedule", "/sensing", "/playback/subscribe/", "/x/pair"):
        refused = assert_error(
            client.post(path, content=body, headers=headers), 415, "unsupported-media-type"
        )
        assert "Content-Type: application/json" in refused["message"]
    assert client.get("/sensing").json() == []
    unchanged(screen, sequence)
    # The same request, labelled JSON, is taken; so is an unlabelled one from a client that is
    # no browser (the spec requires no header).
    taken = client.post("/schedule", json=ITEM)
    assert taken.status_code == 202
    if content_type is None:
        assert client.post("/schedule", content=body).status_code == 202


def test_a_foreign_host_or_origin_is_refused_and_changes_nothing(
    make_screen: Callable[..., Screen],
) -> None:
    screen = open_screen(make_screen, names=("signage-3.lan",))
    port = screen.extra["server"].port
    client = screen.client("127.0.0.2")
    sequence = screen.display.playback()["sequence"]
    # DNS rebinding: a page of evil.example, whose name now points at 127.0.0.1.
    rebound = {"Host": f"evil.example:{port}"}
    body = assert_error(client.post("/schedule", json=ITEM, headers=rebound), 403, "forbidden-host")
    assert "evil.example" in body["message"] and "[listen] hosts" in body["message"]
    for path in ("/playback/", "/x/screenshot", "/x/health", "/"):
        assert_error(client.get(path, headers=rebound), 403, "forbidden-host")
    assert_error(client.get("/", headers={"Host": "localhost"}), 403, "forbidden-host")
    assert_error(client.get("/", headers={"Host": "127.0.0.1:1"}), 403, "forbidden-host")
    # A page on another origin, sent to the right name.
    for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", "null"):
        assert_error(
            client.post("/schedule", json=ITEM, headers={"Origin": origin}),
            403,
            "forbidden-origin",
        )
    unchanged(screen, sequence)
    # The names the display answers to, and its own origin.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"signage-3.lan:{port}"):
        assert client.get("/playback/", headers={"Host": host}).status_code == 200
    own = {"Origin": f"http://127.0.0.1:{port}"}
    assert client.post("/schedule", json=ITEM, headers=own).status_code == 202
    assert client.post("/schedule", json=ITEM).status_code == 202  # no Origin: not a browser


def test_beyond_loopback_with_no_names_any_host_but_a_token_is_needed(
    make_screen: Callable[..., Screen],
) -> None:
    screen = make_screen()  # 0.0.0.0: reached by whatever name the operator uses
    client = screen.client("127.0.0.2")
    token = screen.pair("ops")
    named = {"Host": "lobby-screen.example:8080"}
    assert_error(client.post("/schedule", json=ITEM, headers=named), 401, "not-paired")
    answer = client.post("/schedule", json=ITEM, headers={**named, **bearer(token)})
    assert answer.status_code == 202
    # A page cannot borrow a token, and a foreign Origin is refused even with one.
    foreign = {**bearer(token), "Origin": "http://evil.example"}
    assert_error(client.post("/schedule", json=ITEM, headers=foreign), 403, "forbidden-origin")


def test_the_event_stream_needs_a_token_beyond_loopback(
    make_screen: Callable[..., Screen],
) -> None:
    screen = make_screen()
    client = screen.client("127.0.0.2")
    assert_error(client.get("/x/playback/events"), 401, "not-paired")
    token = _pair(screen, "wall", "read")
    with client.stream("GET", "/x/playback/events", headers=bearer(token)) as stream:
        assert stream.status_code == 200
        assert stream.headers["Content-Type"].startswith("text/event-stream")


# -- Roles -----------------------------------------------------------------------------------


def _pair(screen: Screen, name: str, role: str, source: str = "127.0.0.9") -> str:
    answer = screen.client(source).post(
        "/x/pair", json={"code": screen.code(), "name": name, "role": role}
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["role"] == role
    token: str = answer.json()["token"]
    return token


def test_each_role_does_what_it_is_for_and_no_more(make_screen: Callable[..., Screen]) -> None:
    screen = make_screen()
    client = screen.client("127.0.0.2")
    tokens = {role: _pair(screen, role, role) for role in ("control", "sensor", "content", "read")}
    reading = {"sensor-id": "door", "sensor-type": "contact", "data": True}
    hook = {"subscriber-uri": "http://127.0.0.1:9/hook"}

    def status(role: str, method: str, path: str, body: Any = None) -> int:
        response = client.request(method, path, json=body, headers=bearer(tokens[role]))
        if response.status_code == 403:
            refused = response.json()
            assert refused["error"] == "forbidden" and refused["role"] == role
            assert "control" in refused["needs"] and f"'{role}'" in refused["message"]
        return response.status_code

    allowed = {
        "control": {"schedule", "sensing", "subscribe", "screenshot", "pairings", "events"},
        "sensor": {"sensing"},
        "content": {"schedule"},
        "read": {"subscribe", "events"},
    }
    for role, may in allowed.items():
        checks = {
            "schedule": status(role, "POST", "/schedule", ITEM) in (202,),
            "sensing": status(role, "POST", "/sensing", reading) == 200,
            "subscribe": status(role, "POST", "/playback/subscribe/", hook) == 201,
            "pairings": status(role, "GET", "/x/pairings") == 200,
            "events": _stream_status(client, tokens[role]) == 200,
        }
        shot = status(role, "GET", "/x/screenshot")
        checks["screenshot"] = shot != 403  # no screen here: 503 once allowed
        assert {name for name, ok in checks.items() if ok} == may, role
    # Only control unpairs: a sensor's token cannot remove the others.
    body = assert_error(
        client.delete("/x/pairings/control", headers=bearer(tokens["sensor"])), 403, "forbidden"
    )
    assert body["role"] == "sensor" and body["needs"] == ["control"]
    listed = client.get("/x/pairings", headers=bearer(tokens["control"])).json()
    assert {entry["name"]: entry["role"] for entry in listed} == {
        "control": "control",
        "sensor": "sensor",
        "content": "content",
        "read": "read",
    }
    assert client.delete("/x/pairings/sensor", headers=bearer(tokens["control"])).json() == {}
    assert_error(
        client.post("/sensing", json=reading, headers=bearer(tokens["sensor"])), 401, "not-paired"
    )
    # A role refused is not a wrong guess: no lock-out follows.
    for _ in range(15):
        status("read", "POST", "/schedule", ITEM)
    assert screen.security.tokens.retry_after("127.0.0.2") is None
    assert_error(
        client.post("/x/pair", json={"code": screen.code(), "name": "x", "role": "admin"}),
        400,
        "invalid-field",
    )


def _stream_status(client: httpx.Client, token: str) -> int:
    with client.stream("GET", "/x/playback/events", headers=bearer(token)) as stream:
        return stream.status_code


def test_pairings_made_before_roles_read_as_control(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "pairings.db") as old:
        old.execute(
            "CREATE TABLE controllers (name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL"
            " UNIQUE, paired REAL NOT NULL)"
        )
        digest = "c0ffee" * 10 + "c0ff"
        old.execute("INSERT INTO controllers VALUES ('ops', ?, 0)", (digest,))
        old.execute("PRAGMA user_version=1")
    old.close()
    pairing = Pairing(tmp_path)
    try:
        assert pairing.controllers() == [
            {"name": "ops", "role": "control", "paired": "1970-01-01T00:00:00+00:00"}
        ]
    finally:
        pairing.close()


def test_ctl_pairs_with_a_role_and_lists_roles(
    make_screen: Callable[..., Screen], tmp_path: Path
) -> None:
    screen = make_screen()
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("PDN_API_TOKEN", None)

    def ctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PDN, "ctl", *args], capture_output=True, text=True, timeout=60, check=False, env=env
        )

    paired = ctl("pair", screen.url, screen.code(), "--name", "door", "--role", "sensor")
    assert paired.returncode == 0, paired.stderr
    assert "role sensor" in paired.stdout
    refused = ctl("schedule", screen.url, "http://example.org/")
    assert refused.returncode != 0 and "sensor" in refused.stderr
    control = _pair(screen, "ops", "control")
    listed = subprocess.run(
        [PDN, "ctl", "pairings", screen.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "PDN_API_TOKEN": control, "PDN_API_URL": screen.url},
    )
    assert listed.returncode == 0, listed.stderr
    assert "door  role sensor" in listed.stdout and "ops  role control" in listed.stdout
    assert ctl("pair", screen.url, "ABCD-EFGH", "--role", "root").returncode == 2


# -- Lock-out ----------------------------------------------------------------------------------


def raw_post(port: int, source: str, path: str, body: bytes, headers: dict[str, str]) -> int:
    """One request from ``source``, on a connection of its own (no pool of thousands)."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=10, source_address=(source, 0)
    )
    try:
        connection.request("POST", path, body=body, headers={**JSON, **headers})
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_locked_address_stays_locked_while_5000_others_fail(
    make_screen: Callable[..., Screen],
) -> None:
    screen = make_screen()
    port = screen.extra["server"].port
    locked = screen.client("127.0.0.2")
    for _ in range(10):
        locked.post("/schedule", json=ITEM, headers=bearer("pdn_wrong"))
    assert_error(locked.post("/schedule", json=ITEM), 429, "too-many-attempts")
    body = b'{"content-item": "http://example.org/page"}'
    wrong = {"Authorization": "Bearer pdn_wrong"}
    sources = [f"127.1.{n // 250}.{n % 250 + 1}" for n in range(5000)]
    assert {raw_post(port, source, "/schedule", body, wrong) for source in sources} == {401}
    still = locked.post("/schedule", json=ITEM)
    assert_error(still, 429, "too-many-attempts")
    assert 0 < int(still.headers["Retry-After"]) <= 60
    assert len(screen.security.tokens._records) <= screen.security.tokens.max_addresses


def test_lockout_table_never_frees_a_locked_address_and_stays_bounded() -> None:
    now = [0.0]
    guard = Lockout(limit=2, window=60, first_wait=60, max_addresses=100, clock=lambda: now[0])
    for locked in ("10.0.0.1", "10.0.0.2"):
        guard.failed(locked)
        assert guard.failed(locked) == 60
    for number in range(5000):  # each fails once: never locked, so they make room
        guard.failed(f"10.1.{number // 250}.{number % 250}")
    assert guard.retry_after("10.0.0.1") == 60 and guard.retry_after("10.0.0.2") == 60
    assert len(guard._records) <= 100
    # A table full of locked clients: the rest share one budget and are locked together.
    for number in range(98):
        guard.failed(f"10.2.0.{number}")
        assert guard.failed(f"10.2.0.{number}") == 60
    assert guard.retry_after("10.0.0.1") == 60
    assert len(guard._records) == 100
    assert all(guard.retry_after(address) == 60 for address in guard._records)
    assert guard.retry_after("10.3.0.1") is None
    guard.failed("10.3.0.1")
    assert guard.failed("10.3.0.2") == 60
    assert guard.retry_after("10.3.0.99") == 60  # a client never heard from: locked too
    now[0] += 61  # the locks run out; room again
    assert guard.retry_after("10.0.0.1") is None and guard.retry_after("10.3.0.99") is None
    assert guard.failed("10.4.0.1") is None and "10.4.0.1" in guard._records


def test_ipv6_is_counted_per_64() -> None:
    assert (
        client_key("2001:db8:1:2::1") == client_key("2001:db8:1:2:ffff::9") == ("2001:db8:1:2::/64")
    )
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_key("fe80::1%eth0") == "fe80::/64"
    guard = Lockout(limit=3, window=60)
    guard.failed("2001:db8:1:2::1")
    guard.failed("2001:db8:1:2::2")
    assert guard.failed("2001:db8:1:2:abcd::3") == 60
    assert guard.retry_after("2001:db8:1:2:ffff:ffff:ffff:ffff") == 60
    assert guard.retry_after("2001:db8:1:3::1") is None


def test_an_ipv6_client_is_locked_out_end_to_end(make_screen: Callable[..., Screen]) -> None:
    try:
        screen = make_screen(host="::1")
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    port = screen.extra["server"].port
    with httpx.Client(base_url=f"http://[::1]:{port}", timeout=10) as client:
        for _ in range(5):
            client.post("/x/pair", json={"code": "WRONG-CODE", "name": "mallory"})
        assert_error(
            client.post("/x/pair", json={"code": screen.code(), "name": "x"}),
            429,
            "too-many-attempts",
        )
    assert screen.security.codes.retry_after("::1") is not None
    assert screen.security.codes.retry_after("::2") is not None  # the same /64


def test_the_code_is_renewed_after_20_wrong_tries_from_many_addresses(
    make_screen: Callable[..., Screen], caplog: pytest.LogCaptureFixture
) -> None:
    screen = make_screen()
    first = screen.code()
    written, _ = read_code_file(screen.display.data_dir)
    assert written == first
    sources = [f"127.0.0.{20 + n}" for n in range(CODE_TRIES // 4)]
    with caplog.at_level(logging.WARNING, logger="pdn.pairing"):
        for attempt in range(4):  # four each: no address is locked out
            for source in sources:
                assert screen.client(source).post(
                    "/x/pair", json={"code": f"WRON-G{attempt:03d}", "name": "m"}
                ).status_code in (403,)
                if (attempt, source) != (3, sources[-1]):
                    assert screen.code() == first
    assert screen.code() != first
    assert read_code_file(screen.display.data_dir)[0] == screen.code()
    assert "tried wrongly 20 times" in caplog.text
    assert first not in caplog.text and screen.code() not in caplog.text
    assert (screen.display.data_dir / CODE_FILE).stat().st_mode & 0o777 == 0o600


# -- The replay cache --------------------------------------------------------------------------


def test_taken_webhook_ids_survive_a_restart_and_stay_bounded(tmp_path: Path) -> None:
    secret = new_secret()
    now = [1_000_000.0]
    body = b'{"content-item": "http://example.org/"}'
    headers = signed_headers(secret, "msg_1", body, now=now[0])
    store = SeenIds(tmp_path / "display.db", remember=50)
    assert Verifier(store=store, clock=lambda: now[0]).verify([parse_secret(secret)], headers, body)
    store.close()
    reopened = SeenIds(tmp_path / "display.db", remember=50)
    verifier = Verifier(store=reopened, clock=lambda: now[0])
    assert not verifier.verify([parse_secret(secret)], headers, body)  # the replay: dropped
    for number in range(200):
        event = f"msg_{number + 2}"
        verifier.verify([parse_secret(secret)], signed_headers(secret, event, body, now[0]), body)
    assert reopened.count() <= 50
    now[0] += 700  # past twice the window: pruned at the next one
    fresh = signed_headers(secret, "msg_late", body, now=now[0])
    assert verifier.verify([parse_secret(secret)], fresh, body)
    assert reopened.count() == 1
    reopened.close()
