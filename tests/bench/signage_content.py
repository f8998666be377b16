"""Content that looks like real signage, served on loopback, for the memory benchmark.

- Pages: ``/page/<n>.html``, a different document for every ``n`` (theme, headline, ticker,
  departures): a header with a clock, a news ticker, a table of 14 departures, an inline SVG
  bar chart, a canvas chart animated with requestAnimationFrame, and a script that re-creates
  arrays and objects every second (about 60 elements in all). Sent with ``no-store``.
- Images: 1920x1080 JPEG and PNG pictures (ffmpeg test patterns), ``/media/<file>``, for a
  CDS whose items carry their SHA-256 so the display's cache downloads and verifies them.
- Videos: short VP8 and VP9 WebMs (ffmpeg), ``/media/<file>?n=<n>``; WebMs committed under
  tests/fixtures/video/ are used as well when there are any.

No colour that fills a page is near black or near white, so a frame that is all black or all
white at the sample points is never our content.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.bench.loopback import Answer, LoopbackSite

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_VIDEOS = ROOT / "tests" / "fixtures" / "video"

THEMES = [  # background, panel, accent: never near black or white
    ("#1d3557", "#274c77", "#f4a261"),
    ("#2a9d8f", "#21867a", "#e9c46a"),
    ("#6a4c93", "#58407c", "#8ac926"),
    ("#9d0208", "#7f0106", "#ffba08"),
    ("#005f73", "#0a9396", "#ee9b00"),
    ("#3a5a40", "#344e41", "#dad7cd"),
    ("#7b2cbf", "#5a189a", "#ff9e00"),
    ("#264653", "#2a3f4a", "#e76f51"),
]
DESTINATIONS = [
    "Airport",
    "Central",
    "Harbour",
    "University",
    "Old Town",
    "Stadium",
    "Hospital",
    "North Park",
    "Riverside",
    "Market Square",
    "Tech Campus",
    "West Gate",
    "Zoo",
    "Lakeside",
]
HEADLINES = [
    "Council approves new cycle lanes",
    "Weekend works on line 4",
    "Museum opens late on Fridays",
    "Heat advisory this afternoon",
    "Farmers' market moves indoors",
    "New tram cars enter service",
    "Library extends opening hours",
    "Concert in the park tonight",
    "Road closure on Bridge St",
]

STATES = ["On time, platform", "Delayed, platform", "Boarding, platform"]
IMAGE_SOURCES = [  # (file name, ffmpeg lavfi source)
    ("bars.jpg", "smptehdbars=size=1920x1080"),
    ("pattern.png", "testsrc2=size=1920x1080"),
    ("rgb.jpg", "rgbtestsrc=size=1920x1080"),
    ("gradient.png", "gradients=size=1920x1080:seed=7:n=5"),
    ("fractal.jpg", "mandelbrot=size=1920x1080:start_scale=2.5"),
    ("pattern-2.png", "testsrc=size=1920x1080"),
]
_VPX = ["-deadline", "realtime", "-cpu-used", "8"]
# MP4s with their index first (+faststart): they are streamed from a server without ranges.
_X264 = ["-c:v", "libx264", "-preset", "veryfast", "-movflags", "+faststart"]
_X265 = ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"]
_X265 += ["-movflags", "+faststart"]
VIDEO_SOURCES = [  # (file name, ffmpeg lavfi source, encoder options)
    ("pattern-vp8-1080p.webm", "testsrc2=size=1920x1080:rate=30", ["-c:v", "libvpx", *_VPX]),
    ("bars-vp9-1080p.webm", "smptehdbars=size=1920x1080:rate=30", ["-c:v", "libvpx-vp9", *_VPX]),
    (
        "gradient-vp9-720p.webm",
        "gradients=size=1280x720:r=30:speed=0.05",
        ["-c:v", "libvpx-vp9", *_VPX],
    ),
    ("pattern-vp8-720p.webm", "testsrc=size=1280x720:rate=30", ["-c:v", "libvpx", *_VPX]),
    ("pattern-h264-1080p.mp4", "testsrc2=size=1920x1080:rate=30", _X264),
    ("bars-hevc-720p.mp4", "smptehdbars=size=1280x720:rate=30", _X265),
]
VIDEO_SECONDS = 3
MEDIA_TYPES = {"jpg": "image/jpeg", "png": "image/png", "webm": "video/webm", "mp4": "video/mp4"}


def page(n: int) -> bytes:
    """Signage page number ``n``: its own theme, text and numbers."""
    chance = random.Random(n)
    background, panel, accent = THEMES[n % len(THEMES)]
    rows = "".join(
        f"<tr><td>{chance.randint(1, 99)}</td><td>{chance.choice(DESTINATIONS)}</td>"
        f"<td>{chance.randint(5, 23):02d}:{chance.randint(0, 59):02d}</td>"
        f"<td>{chance.choice(STATES)} {n % 9 + 1}</td></tr>"
        for _ in range(14)
    )
    bars = "".join(
        f"<rect x='{i * 22}' y='{200 - h}' width='16' height='{h}' fill='{accent}'/>"
        for i, h in enumerate(chance.randint(20, 190) for _ in range(24))
    )
    ticker = " &#9679; ".join(chance.sample(HEADLINES, 5))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Signage {n}</title>
<style>
html,body{{margin:0;height:100%;background:{background};color:#fff;font:28px sans-serif;
overflow:hidden}}
header{{display:flex;justify-content:space-between;padding:24px 48px;background:{panel}}}
header h1{{margin:0;font-size:56px}} #clock{{font-size:56px;color:{accent}}}
main{{display:grid;grid-template-columns:1.3fr 1fr;gap:32px;padding:32px 48px}}
table{{width:100%;border-collapse:collapse}} td{{padding:8px;border-bottom:2px solid {panel}}}
.ticker{{position:absolute;bottom:0;width:100%;background:{panel};white-space:nowrap;
padding:16px 0}} .ticker span{{display:inline-block;animation:scroll 20s linear infinite}}
@keyframes scroll{{from{{transform:translateX(100vw)}}to{{transform:translateX(-100%)}}}}
</style></head><body>
<header><h1>Station {n}</h1><div id="clock">--:--:--</div></header>
<main><section><h2>Departures</h2><table><tbody>{rows}</tbody></table></section>
<section><h2>Passengers per hour</h2><svg width="540" height="200">{bars}</svg>
<h2>Live load</h2><canvas id="chart" width="540" height="220"></canvas></section></main>
<div class="ticker"><span>{ticker}</span></div>
<script>
const clock = document.getElementById('clock');
const chart = document.getElementById('chart').getContext('2d');
let samples = [], history = [];
function tick() {{
  clock.textContent = new Date().toLocaleTimeString();
  // A page that allocates, as real ones do: fresh arrays and objects every second.
  samples = Array.from({{length: 20000}}, (_, i) => ({{i, v: Math.random(), s: 'x' + i}}));
  history.push(samples.slice(0, 100).map(o => o.v));
  if (history.length > 60) history.shift();
}}
function draw(t) {{
  chart.fillStyle = '{panel}';
  chart.fillRect(0, 0, 540, 220);
  chart.strokeStyle = '{accent}';
  chart.lineWidth = 4;
  chart.beginPath();
  for (let x = 0; x <= 540; x += 6) {{
    chart.lineTo(x, 110 + 80 * Math.sin(x / 40 + t / 300) * Math.cos(t / 1700));
  }}
  chart.stroke();
  requestAnimationFrame(draw);
}}
tick(); setInterval(tick, 1000); requestAnimationFrame(draw);
</script></body></html>""".encode()


@dataclass(frozen=True)
class Image:
    name: str
    content_type: str
    sha256: str


def require_ffmpeg(purpose: str = "to make the benchmark's images and WebM videos") -> str:
    """ffmpeg's path, or an exit that says what it is needed for and how to install it."""
    found = shutil.which("ffmpeg")
    if found is None:
        raise SystemExit(f"ffmpeg is needed {purpose}: apt-get install -y ffmpeg (Debian/Ubuntu)")
    return found


def lavfi_image(source: str, path: Path) -> Path:
    """One frame of an FFmpeg filter ``source`` (``color=c=0xff0000:s=1920x1080``, say) as
    the picture ``path`` (its format from its name; a JPEG at quality 3)."""
    quality = ["-q:v", "3"] if path.suffix == ".jpg" else []
    subprocess.run(
        [require_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i", source,
         "-frames:v", "1", *quality, str(path)],
        check=True, timeout=60,
    )  # fmt: skip
    return path


def make_media(directory: Path) -> tuple[list[Image], list[str]]:
    """The images and videos, made once into ``directory`` (kept between runs).
    Returns (images, video file names)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, source in IMAGE_SOURCES:
        if not (directory / name).exists():
            lavfi_image(source, directory / name)
    for name, source, codec in VIDEO_SOURCES:
        if not (directory / name).exists():
            subprocess.run(
                [
                    require_ffmpeg(),
                    "-v",
                    "error",
                    "-y",
                    "-f",
                    "lavfi",
                    "-i",
                    source,
                    "-t",
                    str(VIDEO_SECONDS),
                    *codec,
                    "-b:v",
                    "3M",
                    "-pix_fmt",
                    "yuv420p",
                    str(directory / name),
                ],
                check=True,
            )
    videos = [name for name, _, _ in VIDEO_SOURCES]
    if FIXTURE_VIDEOS.is_dir():
        for fixture in sorted(FIXTURE_VIDEOS.glob("*.webm")):
            shutil.copyfile(fixture, directory / f"fixture-{fixture.name}")
            videos.append(f"fixture-{fixture.name}")
    images = [
        Image(
            name,
            "image/jpeg" if name.endswith(".jpg") else "image/png",
            hashlib.sha256((directory / name).read_bytes()).hexdigest(),
        )
        for name, _ in IMAGE_SOURCES
    ]
    return images, videos


class ContentServer:
    """Pages from ``page(n)`` and the files of a media directory, on 127.0.0.1."""

    def __init__(self, media: Path) -> None:
        self.requests = 0
        self.media = media
        self.site = LoopbackSite(self._answer)
        self.url = self.site.base

    def _answer(self, path: str) -> Answer | None:
        self.requests += 1
        if path.startswith("/page/") and path.endswith(".html"):
            try:
                return Answer(page(int(path[6:-5])), "text/html; charset=utf-8")
            except ValueError:
                return None
        file = self.media / path.removeprefix("/media/")
        if path.startswith("/media/") and file.is_file():
            return Answer(file.read_bytes(), MEDIA_TYPES[file.suffix[1:]], "max-age=3600")
        return None

    def image_schedule(self, images: list[Image], seconds: float) -> bytes:
        """A CDS playing the cached images in order, ``seconds`` each, at the lowest
        priority: it fills the moments the request queue is empty."""
        items = "".join(
            f'<content-item content-type="{image.content_type}"><requires-file>'
            f'<hashes><hash type="sha256">{image.sha256}</hash></hashes>'
            f"<sources><uri>{self.url}/media/{image.name}</uri></sources>"
            "</requires-file></content-item>"
            for image in images
        )
        return (
            '<content-set name="bench-images"><constraints><scheduling-constraints>'
            '<playback order="inorder"/><priority level="lowest"/>'
            f"<preferred-duration>{seconds:g} seconds</preferred-duration>"
            f"</scheduling-constraints></constraints>{items}</content-set>"
        ).encode()

    def stop(self) -> None:
        self.site.stop()
