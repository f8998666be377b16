"""Schedule-to-pixel, end to end: from ``POST /schedule`` to the new item's pixels on screen.

    .venv/bin/python -m tests.bench.bench_schedule_to_pixel [--switches 50]

Starts a real ``pdn display`` (Qt WebEngine offscreen) on loopback and a content server, then
for each of N switches sends a scheduling request from an idle screen and reads when the item
was painted: the playback record's ``started`` is stamped by the renderer only once the new
item's pixels are confirmed on screen, so ``started - request sent`` is schedule-to-pixel on one
clock. The
display crossfades (0.3 s by default), so the time until a screenshot shows the item in full
(its colour at the centre) is measured too, by polling ``/x/screenshot``.

Two kinds of item (the targets on this machine: p95 < 300 ms and < 150 ms):
- a page served on loopback, sent as JSON (``content-item``);
- a cached image: a CDS whose item is a PNG with its sha256, already downloaded and verified
  (the first round warms the cache and is not counted), so it is drawn from disk.

Prints the figures and writes them to ``bench-results/bench_schedule_to_pixel.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtGui import QColor, QImage

from tests.bench.bench_api import ROOT, Display
from tests.bench.loopback import Answer, LoopbackSite
from tests.bench.stats import percentile

COLOURS = {"red": (220, 30, 30), "blue": (30, 60, 220)}


def png_of(rgb: tuple[int, int, int]) -> bytes:
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(QColor(*rgb))
    path = Path(tempfile.mkdtemp()) / "i.png"
    assert image.save(str(path))
    return path.read_bytes()


class Content:
    """Colour pages ``/page/<name>`` and PNGs ``/image/<name>.png`` on loopback."""

    def __init__(self) -> None:
        self.images = {name: png_of(rgb) for name, rgb in COLOURS.items()}
        self.site = LoopbackSite(self._answer)
        self.url = self.site.base

    def _answer(self, path: str) -> Answer | None:
        name = path.rsplit("/", 1)[-1].removesuffix(".png")
        if name not in COLOURS:
            return None
        if path.startswith("/image/"):
            return Answer(self.images[name], "image/png")
        r, g, b = COLOURS[name]
        return Answer(
            f"<body style='margin:0;background:rgb({r},{g},{b})'></body>".encode(), "text/html"
        )

    def cds(self, name: str | None) -> bytes:
        """The schedule 'bench' holding the cached image ``name``; None: the empty schedule."""
        if name is None:
            return b'<content-set name="bench"/>'
        digest = hashlib.sha256(self.images[name]).hexdigest()
        return (
            '<content-set name="bench"><content-item content-type="image/png"><requires-file>'
            f'<hashes><hash type="sha256">{digest}</hash></hashes>'
            f"<sources><uri>{self.url}/image/{name}.png</uri></sources>"
            "</requires-file></content-item></content-set>"
        ).encode()


def post(display: Display, body: bytes, content_type: str) -> float:
    """Send a request; the wall-clock time it was sent."""
    connection = http.client.HTTPConnection("127.0.0.1", display.port, timeout=30)
    try:
        sent = time.time()
        connection.request("POST", "/schedule", body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        response.read()
        if response.status != 202:
            raise SystemExit(f"POST /schedule answered {response.status}")
        return sent
    finally:
        connection.close()


def screen_colour(display: Display) -> tuple[int, int, int]:
    connection = http.client.HTTPConnection("127.0.0.1", display.port, timeout=30)
    try:
        connection.request("GET", "/x/screenshot")
        image = QImage.fromData(connection.getresponse().read())
    finally:
        connection.close()
    colour = QColor(image.pixel(image.width() // 2, image.height() // 2))
    return colour.red(), colour.green(), colour.blue()


def near(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return all(abs(p - q) <= 12 for p, q in zip(a, b, strict=True))


def switch(
    display: Display, send: bytes, content_type: str, url: str
) -> tuple[float, float | None]:
    """From the idle page: send, and wait for the item to be on screen.

    Returns (swap, full): seconds from the request to the renderer's swap (the playback
    record's ``started``: the new item's first pixels, the start of a crossfade), and to the
    first screenshot whose centre has the item's colour in full (None if none did within 3 s).
    The second includes one screenshot's cost, so it errs on the slow side.
    """
    before = display.playback()["sequence"]
    sent = post(display, send, content_type)
    record = display.wait_playback(
        lambda r: r["sequence"] > before and r["content-item"] == url, timeout=30
    )
    swap = datetime.fromisoformat(record["started"]).timestamp() - sent
    name = url.rsplit("/", 1)[-1].removesuffix(".png")
    deadline = time.time() + 3
    while time.time() < deadline:
        seen = screen_colour(display)
        if near(seen, COLOURS[name]):
            return swap, time.time() - sent
    return swap, None


def to_idle(display: Display, send: bytes | None = None) -> None:
    if send is not None:
        post(display, send, "text/xml")
    display.wait_playback(lambda r: r["origin"] == "idle", timeout=30)


def figures(swaps: list[float], fulls: list[float | None]) -> dict[str, Any]:
    swap_ms = [value * 1000 for value in swaps]
    full_ms = [value * 1000 for value in fulls if value is not None]
    return {
        "switches": len(swap_ms),
        "swap_p50_ms": round(percentile(swap_ms, 0.50), 1),
        "swap_p95_ms": round(percentile(swap_ms, 0.95), 1),
        "full_p50_ms": round(percentile(full_ms, 0.50), 1) if full_ms else None,
        "full_p95_ms": round(percentile(full_ms, 0.95), 1) if full_ms else None,
        "never_on_screen": sum(value is None for value in fulls),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", type=int, default=50)
    parser.add_argument(
        "--output", type=Path, default=ROOT / "bench-results" / "bench_schedule_to_pixel.json"
    )
    args = parser.parse_args()
    content = Content()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-s2p-"))
    display = Display(workdir / "data", workdir / "display.log")
    results: dict[str, Any] = {}
    try:
        to_idle(display)
        names = list(COLOURS)

        swaps: list[float] = []
        fulls: list[float | None] = []
        for n in range(args.switches):
            url = f"{content.url}/page/{names[n % 2]}"
            body = json.dumps({"content-item": url, "preferred-duration": "1 s"}).encode()
            swap, full = switch(display, body, "application/json", url)
            swaps.append(swap)
            fulls.append(full)
            to_idle(display)
        results["page"] = figures(swaps, fulls)

        for name in names:  # warm the cache: download and verify each image once
            switch(display, content.cds(name), "text/xml", f"{content.url}/image/{name}.png")
            to_idle(display, content.cds(None))
        swaps, fulls = [], []
        for n in range(args.switches):
            url = f"{content.url}/image/{names[n % 2]}.png"
            swap, full = switch(display, content.cds(names[n % 2]), "text/xml", url)
            swaps.append(swap)
            fulls.append(full)
            to_idle(display, content.cds(None))
        results["cached_image"] = figures(swaps, fulls)
    finally:
        display.stop()

    for kind, target in (("page", 300), ("cached_image", 150)):
        figure = results[kind]
        print(
            f"POST /schedule to pixels, {kind.replace('_', ' ')} ({figure['switches']} switches,"
            f" target p95 < {target} ms): first pixels (swap) p50 {figure['swap_p50_ms']} ms,"
            f" p95 {figure['swap_p95_ms']} ms; in full on a screenshot (after the crossfade)"
            f" p50 {figure['full_p50_ms']} ms, p95 {figure['full_p95_ms']} ms;"
            f" never on screen: {figure['never_on_screen']}"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
