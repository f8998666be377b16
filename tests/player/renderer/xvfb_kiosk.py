"""A kiosk renderer in its own process, fullscreen on a real X server (run by test_xvfb.py).

    python -m tests.player.renderer.xvfb_kiosk --rotation 90 URL [URL...]

Shows the first URL fullscreen and prints ``READY`` (the test then reads the X screen with
``import -window root``). On the line ``transitions N`` it switches between the URLs N times
while reading the X server's own framebuffer (``QScreen.grabWindow(0)``) as fast as it can,
and prints one JSON line: samples taken and samples that showed none of the expected colours.
On ``quit`` (or end of input) it exits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import count

from player.renderer.options import prepare_process


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rotation", type=int, default=0)
    parser.add_argument("--colours", default="", help="allowed r,g,b;r,g,b for transitions")
    parser.add_argument("--views", type=int, default=2)
    parser.add_argument("urls", nargs="+")
    args = parser.parse_args()
    prepare_process()
    from PySide6.QtCore import QSocketNotifier
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from player.playitem import PlayItem
    from player.renderer import KioskRenderer, RendererOptions
    from tests.support.pixels import near, process_for, rgb, wait_until
    from tests.support.reports import Reports

    app = QApplication(["xvfb-kiosk"])
    renderer = KioskRenderer(
        RendererOptions(rotation=args.rotation, keep_screen_on=True, views=args.views)
    )
    reports = Reports()
    renderer.set_listener(reports)
    tokens = count(1)

    def show(url: str) -> bool:
        play = PlayItem(next(tokens), url, url, "text/html", 10.0, "request")
        renderer.show(play)
        return wait_until(lambda: play.token in reports.shown_tokens(), 15)

    if not show(args.urls[0]):
        print("FAILED", reports.failed, flush=True)
        return 1
    process_for(0.3)
    print("READY", flush=True)
    allowed = [
        tuple(int(v) for v in colour.split(",")) for colour in args.colours.split(";") if colour
    ]
    screen = QGuiApplication.primaryScreen()

    def command() -> None:
        line = sys.stdin.readline().strip()
        if not line or line == "quit":
            app.quit()
            return
        if line.startswith("transitions"):
            total = int(line.split()[1])
            samples = bad = 0
            started = time.monotonic()
            for n in range(total):
                play = PlayItem(
                    next(tokens), args.urls[(n + 1) % len(args.urls)], "", None, 9, "request"
                )
                renderer.show(play)
                until = time.monotonic() + 15
                while play.token not in reports.shown_tokens() and time.monotonic() < until:
                    image = screen.grabWindow(0).toImage()
                    samples += 1
                    points = [
                        rgb(image, x, y)
                        for x, y in ((5, 5), (image.width() // 2, image.height() // 2))
                    ]
                    if not all(any(near(p, ok) for ok in allowed) for p in points):  # type: ignore[arg-type]
                        bad += 1
                    process_for(0.001)
                for _ in range(3):  # and just after the swap
                    image = screen.grabWindow(0).toImage()
                    samples += 1
                    point = rgb(image, image.width() // 2, image.height() // 2)
                    if not any(near(point, ok) for ok in allowed):  # type: ignore[arg-type]
                        bad += 1
                    process_for(0.01)
            result = {"samples": samples, "bad": bad, "seconds": time.monotonic() - started}
            print(json.dumps(result), flush=True)

    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(command)
    app.exec()
    renderer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
