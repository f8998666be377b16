"""A picture of the stage turned 90 degrees in the middle of a cross-fade, read from the X
server's screen (not from the renderer): two signage pages, the second fading in over the first.

    xvfb-run -a -s "-screen 0 960x540x24" .venv/bin/python -m tests.bench.stage_midfade_shot OUT.png
    ... stage_midfade_shot --from-video clip.mp4 --rotation 0 OUT.png   (a video fading into a page)

Needs ImageMagick's ``import`` (installed by ``bash packaging/dev.sh setup``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from player.renderer.options import prepare_process
from tests.bench.loopback import Answer, LoopbackSite

PAGE = """<!doctype html><body style='margin:0;background:{bg};font:bold 120px DejaVu Sans;
color:white'><div style='position:absolute;left:60px;top:60px'>{text}</div>
<div style='position:absolute;left:0;top:0;width:50vw;height:50vh;border:12px solid yellow;
box-sizing:border-box'></div></body>"""


def _page(path: str) -> Answer:
    colour, text = ("#c0392b", "Lunch menu") if "a" in path else ("#2471a3", "Opening hours")
    return Answer(PAGE.format(bg=colour, text=text).encode(), "text/html")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("target", nargs="?", default="stage_rotated_midfade.png")
    parser.add_argument("--from-video", type=Path, help="a video first (fading into a page)")
    parser.add_argument("--rotation", type=int, default=90)
    args = parser.parse_args()
    target = args.target
    prepare_process()
    from PySide6.QtGui import QGuiApplication

    from player.playitem import PlayItem
    from player.renderer import KioskRenderer, RendererOptions
    from tests.support.pixels import process_for, wait_until
    from tests.support.reports import Reports

    _app = QGuiApplication(["stage-midfade-shot"])
    site = LoopbackSite(_page)
    base = site.base
    # A slow fade (1.5 s) so that the picture lands in its middle.
    renderer = KioskRenderer(
        RendererOptions(rotation=args.rotation, crossfade_ms=1500, keep_screen_on=False)
    )
    reports = Reports()
    renderer.set_listener(reports)
    process_for(2)
    first = (base + "/a", "text/html")
    if args.from_video is not None:
        first = (args.from_video.resolve().as_uri(), "video/mp4")
    for token, (url, kind) in ((1, first), (2, (base + "/b", "text/html"))):
        renderer.show(PlayItem(token, url, url, kind, 30.0, "request"))
        if not wait_until(lambda token=token: token in reports.shown_tokens(), 15):  # type: ignore[misc]
            print(f"{url} was not shown: {reports.failed}", file=sys.stderr)
            return 1
        process_for(2 if token == 1 else 0.6)
    subprocess.run(["import", "-window", "root", target], check=True, timeout=30)
    print(target)
    renderer.close()
    site.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
