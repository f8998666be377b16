"""No token goes where it was not made for: the content server, a sensor and ``pdn ctl``, each a
real process, against listeners that record every request and its ``Authorization`` header.

Every party has a loopback address of its own (127.0.0.X): displays, strangers, visitors and the
scheduler are distinct hosts, as on a LAN.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from tests.support.ctl import pdn_ctl
from tests.support.pages import PageServer
from tests.support.peer import json_peer
from tests.support.ports import free_port
from tests.support.process import CREDENTIALS, PDN, PdnProcess
from tests.support.scheduler import start as start_scheduler
from tests.support.waiting import wait_until

SECRET_BODY = "THE-DISPLAY-SAID-THIS-7f3a"
SIGNING_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


def started(tmp: Path, args: list[str], env: dict[str, str], ready: str) -> PdnProcess:
    """``pdn <args>`` as a process of its own on a free port of 127.0.0.1, up once its log says
    ``ready``; none of the developer's tokens in its environment, ``env`` set over it."""
    process = PdnProcess(args[0], tmp / args[0], args[1:], env=env).start()
    return process.wait_ready(lambda: ready in process.text())


def peers(*hosts: str) -> list[PageServer]:
    return [json_peer(host) for host in hosts]


def authorizations(peer: PageServer) -> list[str | None]:
    """The Authorization header of every request the peer received, in order."""
    return [r.headers.get("Authorization") for r in peer.received(method=None)]


def displays_file(path: Path, tables: dict[str, dict[str, str]]) -> Path:
    lines = []
    for url, entries in tables.items():
        lines.append(f'[displays."{url}"]')
        lines += [f"{key} = {json.dumps(value)}" for key, value in entries.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the content server ------------------------------------------------------------------------


@pytest.fixture
def listeners() -> Iterator[dict[str, PageServer]]:
    """Displays on hosts of their own, a stranger, and a scheduler that registered one."""
    named = dict(
        zip(
            ("listed", "paired", "registered", "stranger", "other-port", "scheduler"),
            peers("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.6", "127.0.0.2", "127.0.0.5"),
            strict=True,
        )
    )
    for name, peer in named.items():
        if name != "scheduler":
            peer.route("POST", "/schedule", 202, {"request-status": "scheduling", "x": SECRET_BODY})
    named["scheduler"].route("GET", "/displays", 200, [{"url": named["registered"].url + "/"}])
    yield named
    for peer in named.values():
        peer.close()


def test_the_content_server_forwards_only_to_its_displays_with_their_own_tokens(
    tmp_path: Path, listeners: dict[str, PageServer]
) -> None:
    listed, paired, registered = listeners["listed"], listeners["paired"], listeners["registered"]
    stranger, other_port = listeners["stranger"], listeners["other-port"]
    credentials = displays_file(tmp_path / "displays.toml", {paired.url: {"token": "paired-tok"}})
    content = started(
        tmp_path,
        ["content", "--display", listed.url, "--scheduler", listeners["scheduler"].url],
        {"PDN_DISPLAYS_FILE": str(credentials), "PDN_DISPLAY_TOKEN": "shared-tok"},
        ready="content server ready",
    )
    visitor = httpx.Client(
        base_url=content.url, transport=httpx.HTTPTransport(local_address="127.0.0.7"), timeout=15
    )
    answers: list[httpx.Response] = []

    def ask(display_uri: str) -> httpx.Response:
        body = {
            "application-params": {"text": "Hi"},
            "display-uri": display_uri,
            "requestor": {"device-id": "phone"},
        }
        answer = visitor.post("/message/schedule", json=body)
        answers.append(answer)
        return answer

    try:
        assert "2 listed displays" in content.text()
        # Unknown displays, and known ones with a path, query, fragment or user name: refused.
        refused = {
            stranger.url: 403,
            other_port.url: 403,  # a listed display's host, another port
            f"http://127.0.0.2:{other_port.url.rsplit(':', 1)[1]}/": 403,
            listed.url + "?": 400,
            listed.url + "/?": 400,
            listed.url + "#": 400,
            listed.url + "/#x": 400,
            listed.url + "/x/pair": 400,
            listed.url + "/schedule": 400,
            listed.url + "/../x/pairings": 400,
            listed.url.replace("http://", "http://user:pw@"): 400,
            f"{listed.url}@{stranger.url.removeprefix('http://')}": 400,
            f"{paired.url}@{stranger.url.removeprefix('http://')}/": 400,
            listed.url.replace("http://", "https://"): 403,  # another scheme: another origin
        }
        for display_uri, status in refused.items():
            answer = ask(display_uri)
            assert answer.status_code == status, (display_uri, answer.text)
            error = answer.json()
            if status == 403:
                assert error["error"] == "unknown-display"
                assert "forwards requests only to the displays" in error["message"]
            else:
                assert error["error"] == "invalid-field" and error["field"] == "display-uri"
        for peer in (listed, paired, registered, stranger, other_port):
            assert peer.requests == []
        # Each known display gets the request at its own /schedule, with its own token only.
        for peer in (listed, paired, registered):
            answer = ask(peer.url.replace("http://", "HTTP://") + "/")
            assert answer.status_code == 202 and answer.json() == {"request-status": "forwarded"}
        assert authorizations(listed) == ["Bearer shared-tok"]  # --display: the shared token
        assert authorizations(paired) == ["Bearer paired-tok"]  # its own, not the shared one
        assert authorizations(registered) == [None]  # the scheduler's: none of ours
        for peer in (listed, paired, registered):
            assert [(r.method, r.path) for r in peer.requests] == [("POST", "/schedule")]
        assert [(r.method, r.path) for r in listeners["scheduler"].requests] == [
            ("GET", "/displays?url-only=true")
        ]
        assert authorizations(listeners["scheduler"]) == [None]
        # What a display answers is never passed on, whatever it says.
        rejected = {"request-status": "rejected", "reason": SECRET_BODY}
        listed.route("POST", "/schedule", 202, rejected)
        assert ask(listed.url).json() == {
            "request-status": "rejected",
            "reason": "the display did not take the request",
        }
        listed.route("POST", "/schedule", 401, {"error": "x", "message": SECRET_BODY})
        failed = ask(listed.url).json()
        assert failed["request-status"] == "failed"
        assert failed["reason"].startswith("the display answered 401 Unauthorized")
        for answer in answers:
            assert SECRET_BODY not in answer.text
            assert "shared-tok" not in answer.text and "paired-tok" not in answer.text
        assert stranger.requests == [] and other_port.requests == []
    finally:
        visitor.close()
        content.stop()
    assert "shared-tok" not in content.text() and "paired-tok" not in content.text()


def test_the_content_server_follows_its_schedulers_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PDN_DATABASE_URL", raising=False)
    monkeypatch.delenv("PDN_API_TOKEN", raising=False)
    scheduler = start_scheduler(tmp_path / "scheduler", None)
    (display,) = peers("127.0.0.8")
    display.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    content = started(
        tmp_path, ["content", "--scheduler", scheduler.url], {}, ready="content server ready"
    )
    body = {"application-params": {}, "display-uri": display.url, "requestor": {}}
    try:
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.7")) as visitor:
            schedule = f"{content.url}/message/schedule"
            assert visitor.post(schedule, json=body).status_code == 403  # not registered yet
            location = {"latitude": "N54.0104", "longitude": "W2.7883"}
            registered = httpx.post(
                f"{scheduler.url}/displays", json={"url": display.url, "location": location}
            )
            assert registered.status_code == 201
            wait_until(lambda: visitor.post(schedule, json=body).status_code == 202, step=0.5)
        (forwarded,) = display.received("/schedule")
        assert "Authorization" not in forwarded.headers
    finally:
        content.stop()
        scheduler.stop()
        display.close()


def test_the_content_server_refuses_bad_display_options(tmp_path: Path) -> None:
    for bad in ("http://127.0.0.2:8080/path", "ftp://127.0.0.2", "http://u@127.0.0.2:8080"):
        done = subprocess.run(
            [PDN, "content", "--display", bad, "--port", str(free_port())],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "--display" in done.stderr


# -- the sensor ----------------------------------------------------------------------------------


def sensor_args(tmp_path: Path, reading: Path) -> list[str]:
    reading.write_text("21.5\n")
    return [
        "sensor",
        "--host",
        "0.0.0.0",
        "--sensor-id",
        "hall",
        "--sensor-type",
        "temperature",
        "--file",
        str(reading),
        "--interval",
        "0.2",
        "--poll",
        "0.05",
        "--data-dir",
        str(tmp_path / "sensor"),
    ]


def test_a_sensor_beyond_loopback_without_a_token_takes_no_subscription(tmp_path: Path) -> None:
    (subscriber,) = peers("127.0.0.3")
    sensor = started(
        tmp_path, sensor_args(tmp_path, tmp_path / "reading"), {}, ready="sensor 'hall' ready"
    )
    try:
        assert "no token: subscriptions are refused (401) until PDN_API_TOKEN" in sensor.text()
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as stranger:
            for path in ("/subscribe", "/unsubscribe"):
                answer = stranger.post(
                    f"{sensor.url}{path}", json={"subscriber-uri": f"{subscriber.url}/hook"}
                )
                assert answer.status_code == 401, answer.text
                assert answer.json()["error"] == "unauthorized"
                assert "set PDN_API_TOKEN" in answer.json()["message"]
                assert answer.headers["WWW-Authenticate"].startswith("Bearer")
            # Its reading stays readable, as the spec has it.
            assert stranger.get(f"{sensor.url}/").json()["data"] == "21.5"
        # Ten intervals later, nothing was pushed to the would-be subscriber.
        time.sleep(2.0)
        assert subscriber.requests == []
    finally:
        sensor.stop()
        subscriber.close()


def test_a_sensor_sends_its_bearer_tokens_only_to_the_displays_they_were_made_for(
    tmp_path: Path,
) -> None:
    paired, listed, stranger, signed = peers("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
    credentials = displays_file(
        tmp_path / "displays.toml", {paired.url: {"token": "paired-tok"}, listed.url: {}}
    )
    env = {
        "PDN_API_TOKEN": "sensor-tok",
        "PDN_DISPLAY_TOKEN": "shared-tok",
        "PDN_DISPLAYS_FILE": str(credentials),
    }
    sensor = started(
        tmp_path, sensor_args(tmp_path, tmp_path / "reading"), env, ready="sensor 'hall' ready"
    )
    try:
        operator = httpx.Client(
            base_url=sensor.url,
            transport=httpx.HTTPTransport(local_address="127.0.0.6"),
            headers={"Authorization": "Bearer sensor-tok"},
            timeout=10,
        )
        with operator, httpx.Client(base_url=sensor.url, timeout=10) as anonymous:
            refused = anonymous.post("/subscribe", json={"subscriber-uri": f"{stranger.url}/a"})
            assert refused.status_code == 401
            subscribers = [
                {"subscriber-uri": f"{paired.url}/sensing"},
                {"subscriber-uri": f"{listed.url}/sensing"},
                {"subscriber-uri": f"{stranger.url}/hook"},
                {"subscriber-uri": f"{signed.url}/hook", "signing-secret": SIGNING_SECRET},
                # The paired display's address as a user name: the stranger's URL all the same.
                {"subscriber-uri": f"http://{paired.url[7:]}@{stranger.url[7:]}/userinfo"},
            ]
            for body in subscribers:
                answer = operator.post("/subscribe", json=body)
                assert answer.status_code == 201, answer.text
        for peer in (paired, listed, stranger, signed):
            peer.wait_for(2, timeout=20)
        assert set(authorizations(paired)) == {"Bearer paired-tok"}
        assert set(authorizations(listed)) == {"Bearer shared-tok"}
        for name, peer in (("stranger", stranger), ("signed", signed)):
            sent = {a for a in authorizations(peer) if a is None or a.startswith("Bearer")}
            assert sent == {None}, name
        # The signed subscriber can tell the readings are the sensor's.
        update = signed.received("/hook")[0]
        headers = {key.lower(): value for key, value in update.headers.items()}
        verified = Webhook(SIGNING_SECRET).verify(update.body, headers)
        assert verified["sensor-id"] == "hall" and verified["data"] == 21.5
        assert [r.path for r in stranger.requests if r.path != "/hook"] != []  # the userinfo one
    finally:
        sensor.stop()
        for peer in (paired, listed, stranger, signed):
            peer.close()
    assert "sensor-tok" not in sensor.text() and "paired-tok" not in sensor.text()


# -- pdn ctl ---------------------------------------------------------------------------------------


def ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``pdn ctl <args>`` with none of the developer's tokens, ``env`` set."""
    return pdn_ctl(*args, env=env, unset=CREDENTIALS)


def test_pdn_ctl_sends_each_token_only_to_the_origin_that_issued_it(tmp_path: Path) -> None:
    never, paired, scheduler = peers("127.0.0.2", "127.0.0.3", "127.0.0.4")
    # The scheduler's twin: same host, another port (another origin).
    (twin,) = peers("127.0.0.4")
    for peer in (never, paired):
        peer.route("POST", "/x/pair", 201, {"token": f"new-token-of-{peer.url}"})
    config = tmp_path / "config"
    (config / "pdn").mkdir(parents=True)
    displays_file(config / "pdn" / "ctl.toml", {paired.url: {"token": "paired-tok"}})
    env = {
        "XDG_CONFIG_HOME": str(config),
        "PDN_API_TOKEN": "operator-tok",
        "PDN_API_URL": scheduler.url + "/",
    }
    try:
        # Pairing sends no token: not the operator's, not one kept for that display.
        for peer in (never, paired):
            done = ctl(env, "pair", peer.url, "ABCD-EFGH", "--name", "ana")
            assert done.returncode == 0, done.stderr
            assert authorizations(peer) == [None]
        sent = paired.received("/x/pair")[0].json()
        assert sent == {"code": "ABCD-EFGH", "name": "ana", "role": "control"}
        # The store as it was: one display paired, the other never.
        displays_file(config / "pdn" / "ctl.toml", {paired.url: {"token": "paired-tok"}})
        commands = [
            ("playing", "{}"),
            ("health", "{}"),
            ("sensing", "{}"),
            ("pairings", "{}"),
            ("unpair", "{}", "ana"),
            ("schedule", "{}", "https://example.org/"),
            ("screenshot", "{}", str(tmp_path / "shot.png")),
            ("watch", "{}"),
            ("displays", "{}"),
            ("fleet", "{}"),
            ("plays", "{}"),
            ("approve", "{}", "http://192.0.2.1:8080"),
        ]
        for command, *args in commands:
            for peer in (never, paired):
                ctl(env, command, *(a.format(peer.url) for a in args))
        assert set(authorizations(never)) == {None}
        assert set(authorizations(paired)) == {None, "Bearer paired-tok"}  # None: its pairing
        assert len(authorizations(never)) == len(authorizations(paired)) == 1 + len(commands)
        # The operator token goes to the scheduler it is bound to, and to no other origin.
        for where in (scheduler, twin):
            ctl(env, "displays", where.url)
            ctl(env, "assign", where.url, "--group", "lobby", "menu")
        assert authorizations(scheduler) == ["Bearer operator-tok"] * 2
        assert authorizations(twin) == [None, None]
        twin.route("GET", "/displays", 401, {"error": "unauthorized", "message": "scheduler"})
        refused = ctl(env, "displays", twin.url)
        assert refused.returncode == 1
        assert f"PDN_API_TOKEN was not sent: it belongs to {scheduler.url}" in refused.stderr
        # Not bound to any URL: refused before anything is sent, saying what to set.
        unbound = {**env}
        del unbound["PDN_API_URL"]
        before = [len(p.requests) for p in (never, scheduler)]
        for peer in (never, scheduler):
            done = ctl(unbound, "displays", peer.url)
            assert done.returncode == 2
            assert "PDN_API_TOKEN is set" in done.stderr and "PDN_API_URL" in done.stderr
        assert [len(p.requests) for p in (never, scheduler)] == before
        # A display paired in the store still gets its own token then (it needs no variable).
        assert ctl(unbound, "playing", paired.url).returncode == 0
        assert authorizations(paired)[-1] == "Bearer paired-tok"
        bad = ctl({**env, "PDN_API_URL": "scheduler:8090"}, "displays", scheduler.url)
        assert bad.returncode == 2 and "PDN_API_URL='scheduler:8090'" in bad.stderr
    finally:
        for peer in (never, paired, scheduler, twin):
            peer.close()
