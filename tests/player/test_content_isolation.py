"""A hostile page on a real display (``pdn display`` on Xvfb) gets none of its privileges.

The page is scheduled twice: by a CDS with a hash (so it is cached and played from the
display's content cache) and by a JSON request (played live). Both times it tries every way it
has (fetch, XHR, WebSocket, img, iframe, form post, navigation) to read the display's secrets
(``webhook-secret``, ``tls-key.pem``, ``pairing-code``, another item's cached copy), to drive
the display's API (``POST /schedule``, ``GET /x/pairings``, ``GET /playback/``) and to reach a
loopback listener that counts every connection made to it. Nothing reaches the listener, the
API changes nothing, and the page's own content (with a stylesheet it links relatively) still
shows, read back from the X server.

On loopback every server is "local" to Chromium. The hostile page's server (127.0.0.2) stands
for a public one through Chromium's own test switch ``--ip-address-space-overrides``, given to
the display in ``QTWEBENGINE_CHROMIUM_FLAGS`` (the display's request guard honours it too). A
page served from loopback as it is (the built-in ``message`` app, an intranet board) is local
and still shows with its own subresources.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server.platform.pairing import read_code_file
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer, Reply, Request
from tests.support.process import CREDENTIALS
from tests.support.tools import require_tools
from tests.support.waiting import wait_until
from tests.support.xvfb import xvfb as start_xvfb

pytestmark = [pytest.mark.qt, pytest.mark.xvfb, pytest.mark.slow]

WIDTH, HEIGHT = 480, 320
SECRETS = ("webhook-secret", "tls-key.pem", "pairing-code")
# What each page paints once every attempt has settled: its own colour when nothing leaked
# and its own stylesheet applied; red if anything was read or reached; yellow if its own
# stylesheet never came.
CACHED_COLOUR = (0, 160, 80)
LIVE_COLOUR = (0, 110, 170)
LOCAL_COLOUR = (200, 100, 0)
LEAKED, NO_STYLE = (255, 0, 0), (255, 255, 0)

HOSTILE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="own.css">
<style>html,body{margin:0;height:100%;background:rgb(40,40,40)}</style></head>
<body><div id="probe"></div><iframe name="sink" style="display:none"></iframe><script>
const C = __CONFIG__;
const leaks = [];
const tries = [];
const settle = ms => new Promise(done => setTimeout(done, ms));
function attempt(name, promise) {
  tries.push(Promise.race([
    promise.then(reached => { if (reached) leaks.push(name); }, () => {}), settle(4000)]));
}
const read = (url, options) => fetch(url, options).then(r => r.text()).then(t => true);
const reach = (url, options) => fetch(url, options).then(() => true);
function xhr(method, url, body, type) {
  return new Promise((reached, failed) => {
    const x = new XMLHttpRequest();
    x.open(method, url);
    if (type) x.setRequestHeader('Content-Type', type);
    x.onload = () => reached(true);
    x.onerror = () => failed();
    x.send(body || null);
  });
}
function image(url) {
  return new Promise((reached, failed) => {
    const i = new Image(); i.onload = () => reached(true); i.onerror = () => failed(); i.src = url;
  });
}
function socketTo(url) {
  return new Promise((reached, failed) => {
    const w = new WebSocket(url); w.onopen = () => reached(true); w.onerror = () => failed();
  });
}
function frame(url) {
  const f = document.createElement('iframe');
  f.style.display = 'none'; f.src = url; document.body.appendChild(f);
}
function form(url, field, value, target) {
  const f = document.createElement('form');
  f.method = 'POST'; f.action = url; f.enctype = 'text/plain'; f.style.display = 'none';
  if (target) f.target = target;
  const input = document.createElement('input');
  input.name = field; input.value = value; f.appendChild(input);
  document.body.appendChild(f); f.submit();
}
function everyWay(url, what) {
  attempt('fetch ' + what, read(url));
  attempt('no-cors ' + what, reach(url, {mode: 'no-cors'}));
  attempt('xhr ' + what, xhr('GET', url));
  attempt('img ' + what, image(url));
  frame(url);
}
// 1. The display's files: its secrets, and another item's cached copy.
for (const name of C.secrets) everyWay('file://' + C.dataDir + '/' + name, name);
for (const url of C.otherItem) everyWay(url, 'another item ' + url);
// 2. The display's API, at every name it answers to.
const evil = JSON.stringify({'content-item': C.evil});
for (const base of C.api) {
  attempt('schedule ' + base, reach(base + '/schedule',
    {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: evil}));
  attempt('cds ' + base, reach(base + '/schedule',
    {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/xml'}, body: C.cds}));
  attempt('xhr schedule ' + base, xhr('POST', base + '/schedule', evil, 'application/json'));
  everyWay(base + '/x/pairings', 'pairings ' + base);
  everyWay(base + '/playback/', 'playback ' + base);
  attempt('socket ' + base, socketTo(base.replace('http', 'ws') + '/playback/'));
  form(base + '/schedule', '{"content-item":"' + C.evil + '","x":"', '"}', 'sink');
}
// 3. A loopback listener.
for (const base of C.listener) {
  everyWay(base + '/probe', 'listener ' + base);
  const posted = reach(base + '/post', {method: 'POST', mode: 'no-cors', body: 'x'});
  attempt('listener post ' + base, posted);
  attempt('listener socket ' + base, socketTo(base.replace('http', 'ws') + '/socket'));
  form(base + '/form', 'secret', 'x', 'sink');
}
// 4. Ways Chromium opens a connection before the display can look at the request: a redirect
// from the page's own server, and a preconnect hint. A bare connection, never a byte.
for (const base of C.bare) {
  const via = path => '/redirect?to=' + base + path;
  attempt('redirected fetch ' + base, reach(via('/fetch'), {mode: 'no-cors'}));
  attempt('redirected img ' + base, image(via('/img')));
  frame(via('/frame'));
  const hint = document.createElement('link');
  hint.rel = 'preconnect'; hint.href = base; document.head.appendChild(hint);
}
// 5. The display's API through the page's own server: a redirect Chromium may follow before
// the display can refuse it (a cached page: see docs/security.md). What it can change it refuses.
// Whether the request arrives is not what is judged here (its answer is opaque to the page):
// the display's state afterwards is.
const fired = promise => tries.push(Promise.race([promise.catch(() => {}), settle(4000)]));
for (const base of C.apiByRedirect) {
  const via = path => C.server + '/redirect?to=' + base + path;
  fired(fetch(via('/schedule'),
    {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: evil}));
  fired(fetch(via('/schedule'), {method: 'POST', mode: 'no-cors', body: evil}));
  fired(fetch(via('/x/pair'),
    {method: 'POST', mode: 'no-cors', body: JSON.stringify({code: C.code, name: 'x'})}));
  fired(image(via('/x/pairings')));
}
Promise.all(tries).then(async () => {
  // Last, the page tries to leave: by a form and by navigation. It must stay where it is.
  form(C.listener[0] + '/leave', 'secret', 'x');
  await settle(300);
  location.href = C.api[0] + '/x/pairings';
  await settle(300);
  location.href = C.listener[0] + '/navigate';
  await settle(300);
  if (C.bare.length) location.href = '/redirect?to=' + C.bare[0] + '/navigate';
  await settle(1000);
  const styled = getComputedStyle(document.getElementById('probe')).width === '7px';
  const colour = leaks.length ? 'rgb(255,0,0)' : styled ? C.colour : 'rgb(255,255,0)';
  document.body.style.background = colour;
  document.title = JSON.stringify(leaks);
});
</script></body></html>
"""
OWN_CSS = b"#probe{width:7px;height:7px}\n"
LOCAL_PAGE = b"""<!doctype html><html><head><link rel="stylesheet" href="local.css"></head>
<body style="margin:0;height:100%"></body></html>"""
LOCAL_CSS = "html,body{{height:100%;background:rgb({},{},{})}}".format(*LOCAL_COLOUR).encode()
VICTIM = b"<!doctype html><html><body style='background:#fff'>another item's secret</body></html>"


def redirect(request: Request) -> Reply | None:
    """``/redirect?to=URL``: on to anywhere the page names; a 307 passes a POST's method and
    body on (the page's own server sends its POST on to wherever the page names)."""
    if not request.path.startswith("/redirect?to="):
        return None
    status = 302 if request.method == "GET" else 307
    return Reply(status, headers={"Location": request.path.split("=", 1)[1]})


def pages(address: str) -> PageServer:
    """A page server on one loopback address that redirects where it is asked to."""
    server = PageServer(address)
    server.handle(redirect)
    return server


def asked(server: PageServer) -> list[str]:
    """Every path the server was asked for, in order."""
    return [request.path for request in server.received(method=None)]


class Listener:
    """A loopback TCP port that counts every connection made to it and every byte sent on one,
    and answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self.received = b""
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(2)
            with contextlib.suppress(OSError):
                self.received += connection.recv(4096)

    def close(self) -> None:
        self._closed = True
        self.sock.close()


class Running(DisplayProcess):
    """The display on an X server of its own, ``x_display``."""

    def __init__(self, folder: Path, x_display: str, env: dict[str, str]) -> None:
        super().__init__(
            folder,
            config='name = "Isolation"\ntimezone = "UTC"\n',
            platform="xcb",
            env={"DISPLAY": x_display, **env},
            unset=(*CREDENTIALS, "WAYLAND_DISPLAY"),
        )
        self.x_display = x_display

    def screen(self, path: Path) -> Any:
        from PySide6.QtGui import QImage

        env = dict(os.environ, DISPLAY=self.x_display)
        subprocess.run(["import", "-window", "root", str(path)], env=env, check=True, timeout=30)
        image = QImage(str(path))
        assert not image.isNull()
        return image


def colour_at_centre(image: Any) -> tuple[int, int, int]:
    from PySide6.QtGui import QColor

    found = QColor(image.pixel(image.width() // 2, image.height() // 2))
    return (found.red(), found.green(), found.blue())


def near(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return all(abs(p - q) <= 12 for p, q in zip(a, b, strict=True))


def wait_for_colour(
    running: Running, colour: tuple[int, int, int], shot: Path, timeout: float = 60
) -> None:
    """Until the X server shows ``colour`` at the centre; a red (leaked) or yellow (its own
    stylesheet missing) screen fails at once."""
    seen: list[tuple[int, int, int]] = []

    def shows() -> bool:
        assert running.returncode is None, f"the display exited:\n{log_tail(running)}"
        seen[:] = [colour_at_centre(running.screen(shot))]
        assert not near(seen[0], LEAKED), f"the page read or reached something: {shot}"
        assert not near(seen[0], NO_STYLE), f"the page's own stylesheet did not load: {shot}"
        return near(seen[0], colour)

    wait_until(
        shows, timeout, lambda: f"screen shows {seen}, not {colour}: {shot}\n{log_tail(running)}",
        step=0.5,
    )  # fmt: skip


def log_tail(running: Running) -> str:
    return "\n".join(running.text().splitlines()[-40:])


Servers = tuple[PageServer, PageServer, Listener, Listener]


@pytest.fixture
def servers() -> Iterator[Servers]:
    """The hostile page's server (public), a local one, and two loopback listeners: one that
    no page may connect to, one that redirects and preconnects may connect to, silently."""
    made = (pages("127.0.0.2"), pages("127.0.0.3"), Listener(), Listener())
    yield made
    for closing in made:
        closing.close()


@pytest.fixture
def running(tmp_path: Path, servers: Servers) -> Iterator[Running]:
    require_tools("import", "Xvfb")
    hostile = servers[0]
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # As a display with TLS keeps it; the page must not read it.
    (data_dir / "tls-key.pem").write_text("-----BEGIN PRIVATE KEY-----\nsecret\n")
    (data_dir / "tls-key.pem").chmod(0o600)
    with start_xvfb(WIDTH, HEIGHT) as display:
        flags = f"--ip-address-space-overrides=127.0.0.2:{hostile.port}=public"
        running = Running(tmp_path, display, {"QTWEBENGINE_CHROMIUM_FLAGS": flags})
        try:
            yield running.start().wait_ready(timeout=90)
        finally:
            running.stop(30)


def page_config(
    running: Running,
    hostile: PageServer,
    listeners: tuple[Listener, Listener],
    colour: tuple[int, int, int],
    redirects: bool = True,
) -> dict[str, Any]:
    """What the hostile page is told to try. ``redirects``: also the ways that get a bare
    connection to a listener of their own (never a cached page: see test_content_guard)."""
    listener, bare = listeners
    port = running.url.rsplit(":", 1)[1]
    victim = hashlib.sha256(VICTIM).hexdigest()
    key = f"sha256-{victim}"
    return {
        "dataDir": str(running.data_dir),
        "secrets": [*SECRETS, "display.db", f"cache/files/{key}.html"],
        "otherItem": [f"pdn-item://{key[:63]}/cached/victim.html", f"pdn-item://{key[:63]}/"],
        "api": [f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
        "evil": hostile.url + "/evil.html",
        "cds": '<content-set name="pwned"><content-item content-type="text/html"><requires-file>'
        f"<sources><uri>{hostile.url}/evil.html</uri></sources></requires-file>"
        "</content-item></content-set>",
        "listener": [f"http://127.0.0.1:{listener.port}", f"http://localhost:{listener.port}"],
        "bare": [f"http://127.0.0.1:{bare.port}"] if redirects else [],
        "apiByRedirect": [f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
        "code": current_code(running.data_dir),
        "server": hostile.url,
        "colour": "rgb({},{},{})".format(*colour),
    }


def current_code(data_dir: Path) -> str:
    """The pairing code on the screen now (the page is given it: with it, a pairing that went
    through would show in the pairings)."""
    try:
        return read_code_file(data_dir)[0]
    except (OSError, ValueError):
        return "AAAA-AAAA"  # a display open on loopback may show none


def hostile_page(config: dict[str, Any]) -> bytes:
    return HOSTILE.replace("__CONFIG__", json.dumps(config)).encode()


def schedule_cds(running: Running, hostile: PageServer, page: bytes) -> None:
    """The hostile page cached and playing; beside it another cached item, downloaded (it is in
    the schedule) but due only in years, so the hostile page is what plays meanwhile."""

    def item(path: str, body: bytes, when: str = "") -> str:
        return (
            '<content-item content-type="text/html"><constraints><scheduling-constraints>'
            f"<preferred-duration>PT10M</preferred-duration>{when}</scheduling-constraints>"
            "</constraints><requires-file><hashes>"
            f'<hash type="sha256">{hashlib.sha256(body).hexdigest()}</hash></hashes>'
            f"<sources><uri>{hostile.url}{path}</uri></sources></requires-file></content-item>"
        )

    later = '<date><between start="2099-01-01" end="2099-01-02"/></date>'
    document = (
        '<content-set name="trap">'
        + item("/cached/hostile.html", page)
        + item("/cached/victim.html", VICTIM, later)
        + "</content-set>"
    )
    answer = requests.post(
        running.url + "/schedule",
        data=document.encode(),
        headers={"Content-Type": "text/xml"},
        timeout=10,
    )
    assert answer.status_code == 202, answer.text


def unchanged(running: Running, evil: str, pairings: str, queued: int = 0) -> None:
    """The schedule is the test's, only the test's requests are queued, the page's item never
    played, and the pairings are as they were."""
    health = requests.get(running.url + "/x/health", timeout=10).json()
    assert health["schedule"]["sets"] == ["trap"]
    assert health["engine"]["queue-length"] == queued
    plays = requests.get(running.url + "/x/plays", timeout=10)
    assert plays.status_code == 200 and evil not in plays.text
    assert requests.get(running.url + "/x/pairings", timeout=10).text == pairings


def test_a_hostile_page_reaches_nothing_cached_or_live(
    running: Running, servers: Servers, tmp_path: Path
) -> None:
    hostile, local, listener, bare = servers
    for path in ("/cached/own.css", "/live/own.css"):
        hostile.page(path, OWN_CSS, "text/css", method="GET")
    hostile.page("/cached/victim.html", VICTIM, "text/html", method="GET")
    evil = hostile.url + "/evil.html"
    hostile.page("/evil.html", b"<body style='background:red'>", "text/html", method="GET")
    pairings = requests.get(running.url + "/x/pairings", timeout=10).text

    # 1. Cached: a CDS with a hash; the display plays its verified copy.
    cached = hostile_page(
        page_config(running, hostile, (listener, bare), CACHED_COLOUR, redirects=False)
    )
    hostile.page("/cached/hostile.html", cached, "text/html", method="GET")
    schedule_cds(running, hostile, cached)
    wait_for_colour(running, CACHED_COLOUR, tmp_path / "cached.png", timeout=90)
    victim = f"sha256-{hashlib.sha256(VICTIM).hexdigest()}.html"
    assert (running.data_dir / "cache" / "files" / victim).exists()  # there to be guessed
    # Its relative link went on to its own server, from the cached copy.
    assert "/cached/own.css" in asked(hostile)
    assert listener.connections == 0
    assert bare.received == b""  # connected to, perhaps, but never sent a request
    unchanged(running, evil, pairings)
    assert "/evil.html" not in asked(hostile)
    # It did send its POSTs on to the API by its own server; the API took none of them.
    sent_on = [path for path in asked(hostile) if path.startswith("/redirect?to=")]
    assert any(path.endswith("/schedule") for path in sent_on), asked(hostile)

    # 2. Live: a JSON request for the same page, from its (public) server.
    live = hostile_page(page_config(running, hostile, (listener, bare), LIVE_COLOUR))
    hostile.page("/live/hostile.html", live, "text/html", method="GET")
    # Short: the next request (the local page) waits for it to end.
    item = {"content-item": hostile.url + "/live/hostile.html", "preferred-duration": "PT20S"}
    answer = requests.post(running.url + "/schedule", json=item, timeout=10)
    assert answer.json() == {"request-status": "scheduling"}, answer.text
    wait_for_colour(running, LIVE_COLOUR, tmp_path / "live.png", timeout=60)
    assert listener.connections == 0
    assert bare.received == b""
    unchanged(running, evil, pairings, queued=1)  # the test's own request, on screen
    assert "/evil.html" not in asked(hostile)
    log = running.text()
    assert "refused a request" in log and "the display's own API" in log

    # 3. A page served from loopback as it is (local) shows, with its own subresources.
    local.page("/board/index.html", LOCAL_PAGE, "text/html", method="GET")
    local.page("/board/local.css", LOCAL_CSS, "text/css", method="GET")
    item = {"content-item": local.url + "/board/index.html", "preferred-duration": "PT10M"}
    answer = requests.post(running.url + "/schedule", json=item, timeout=10)
    assert answer.json() == {"request-status": "scheduling"}, answer.text
    wait_for_colour(running, LOCAL_COLOUR, tmp_path / "local.png", timeout=60)
    assert "/board/local.css" in asked(local)
    assert listener.connections == 0 and bare.received == b""
