"""What the kiosk gives web content: a cached copy at an origin of its own, the idle page at the
display's own, a data: image as it is, and nothing it cannot name by http(s)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from itertools import count
from pathlib import Path

import pytest

from player.playitem import PlayItem
from player.renderer import KioskRenderer
from tests.player.conftest import COLOURS, LoopbackServer, write_png
from tests.support.pixels import near, rgb, wait_for_colour, wait_until
from tests.support.reports import Reports

pytestmark = pytest.mark.qt

MakeRenderer = Callable[..., tuple[KioskRenderer, Reports]]
_tokens = count(1)

# Green when the page has its own origin, its relative stylesheet, and none of the other's file.
CACHED = """<!doctype html><html><head><link rel="stylesheet" href="own.css"></head>
<body style="margin:0;height:100vh;background:rgb(40,40,40)"><div id="probe"></div><script>
const other = __OTHER__;
const tries = other.map(url => fetch(url).then(() => url, () => null));
Promise.all(tries).then(read => {
  const leaked = read.filter(url => url !== null);
  const styled = getComputedStyle(document.getElementById('probe')).width === '7px';
  const own = location.origin === 'null' || location.href.startsWith('pdn-item://sha256-');
  document.body.style.background =
    leaked.length ? 'rgb(255,0,0)' : !styled ? 'rgb(255,255,0)' : own ? 'rgb(0,255,0)' : 'blue';
});
</script></body></html>"""


def play(url: str, source: str | None = None, content_type: str = "text/html") -> PlayItem:
    return PlayItem(next(_tokens), url, source or url, content_type, 30.0, "schedule")


def show(renderer: KioskRenderer, reports: Reports, item: PlayItem) -> None:
    renderer.show(item)
    assert wait_until(
        lambda: item.token in reports.shown_tokens() or item.token in reports.failed_tokens(), 15
    )
    assert item.token in reports.shown_tokens(), reports.failed


def cached(files: Path, body: bytes, suffix: str = ".html") -> Path:
    """A file as the content cache names it: its strongest hash, then the source's suffix."""
    path = files / f"sha256-{hashlib.sha256(body).hexdigest()}{suffix}"
    path.write_bytes(body)
    return path


def test_a_cached_page_has_an_origin_of_its_own_and_its_relative_links(
    make_renderer: MakeRenderer, http_server: LoopbackServer, tmp_path: Path
) -> None:
    renderer, reports = make_renderer()
    files = tmp_path / "cache" / "files"
    files.mkdir(parents=True)
    other = cached(files, b"<body style='background:#00f'>the other item</body>")
    first = play(other.as_uri(), http_server.base + "/other/b.html")
    show(renderer, reports, first)
    other_key = other.name.removesuffix(".html")[:63]
    guesses = [f"pdn-item://{other_key}/other/b.html", other.as_uri(), "file:///etc/hostname"]
    page = CACHED.replace("__OTHER__", repr(guesses)).encode()
    mine = cached(files, page)
    http_server.served.files["/dir/own.css"] = (b"#probe{width:7px}", "text/css")
    show(renderer, reports, play(mine.as_uri(), http_server.base + "/dir/page.html"))
    assert wait_for_colour(renderer, COLOURS["green"], 10) is not None, rgb(
        renderer.grab_image(), 160, 120
    )
    # The stylesheet came from the page's own server, asked for by its relative link.
    assert ("/dir/own.css", None) in http_server.served.requests


def test_the_idle_page_is_the_displays_own(make_renderer: MakeRenderer) -> None:
    renderer, reports = make_renderer()
    assert wait_until(lambda: bool(reports.idle), 15)
    slot = next(s for s in renderer.region.slots if s.item is not None)
    assert slot.address == "pdn-display://idle/"

    def styled() -> bool:  # idle.css's dark blue, from the display's own scheme
        red, _, blue = rgb(renderer.grab_image(), 160, 120)
        return blue > red + 30 and 40 < blue < 160

    assert wait_until(styled, 10), rgb(renderer.grab_image(), 160, 120)


def test_a_data_image_shows_and_other_schemes_are_not_loaded(
    make_renderer: MakeRenderer, tmp_path: Path
) -> None:
    renderer, reports = make_renderer()
    png = write_png(tmp_path / "green.png", COLOURS["green"]).read_bytes()
    image = "data:image/png;base64," + base64.b64encode(png).decode()
    show(renderer, reports, play(image, content_type="image/png"))
    assert wait_for_colour(renderer, COLOURS["green"], 10) is not None
    for url in ("javascript:document.body.style.background='red'", "qrc:/index.html"):
        refused = play(url)
        renderer.show(refused)
        assert wait_until(lambda item=refused: item.token in reports.failed_tokens(), 10), url  # type: ignore[misc]
        reason = dict(reports.failed)[refused.token]
        assert "not an address web content is loaded from" in reason
    assert not near(rgb(renderer.grab_image(), 160, 120), COLOURS["red"])
