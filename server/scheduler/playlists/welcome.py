"""The first playlist of a one-box install (``pdn scheduler --welcome GROUP``; docs/install.md,
"One screen, one box").

On a machine that is both a display and its scheduler (``install.sh --services
display,scheduler``), the display registers with the scheduler on loopback in the group
``GROUP``. At the scheduler's first start a picture is made that says where the console is
(``<address>/console/``, as a phone on the same network reaches it) and what to do there; it is
stored in the media library, made into the playlist ``welcome`` and assigned to ``GROUP``: the
screen shows it as soon as it registers, and the operator replaces it from the console.

It is done once: a mark in the data directory (``welcome.done``) keeps a later start from
bringing it back after the operator deleted it. A scheduler that already has playlists or
schedules (an upgrade) gets none and is marked too.
"""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from server.scheduler.fleet import Fleet
from server.scheduler.media.probe import probe
from server.scheduler.media.store import MediaItem, MediaStore
from server.scheduler.playlists.library import Playlists
from server.scheduler.playlists.model import Entry, Playlist
from server.scheduler.schedules import ScheduleLibrary
from server.scheduler.storage import Assignment

__all__ = ["PLAYLIST_ID", "make_first_playlist", "welcome_picture"]

log = logging.getLogger("pdn.scheduler.playlists")

PLAYLIST_ID = "welcome"
MARK = "welcome.done"
SIZE = (1920, 1080)
BACKGROUND = (18, 52, 86)
INK = (255, 255, 255)
SOFT = (190, 210, 230)


def welcome_picture(console_url: str) -> bytes:
    """A 1920x1080 PNG saying where the console is and what to do there."""
    image = Image.new("RGB", SIZE, BACKGROUND)
    draw = ImageDraw.Draw(image)
    # (size, colour, text, the space below it): a paragraph's lines close, the headings apart.
    lines = [
        (96, INK, "This screen is ready", 60),
        (48, SOFT, "Open its console on a phone or a laptop:", 60),
        (72, INK, console_url, 70),
        (40, SOFT, "Sign in with the operator token install.sh", 22),
        (40, SOFT, "printed; upload pictures and videos, make a", 22),
        (40, SOFT, "playlist and assign it to this screen.", 0),
    ]
    y = 240.0
    for size, colour, text, space in lines:
        font = ImageFont.load_default(size=size)
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        draw.text(((SIZE[0] - (right - left)) // 2, y), text, font=font, fill=colour)
        y += float(bottom - top) + space
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def make_first_playlist(
    *,
    data_dir: Path,
    group: str,
    console_url: str,
    media: MediaStore,
    playlists: Playlists,
    schedules: ScheduleLibrary,
    fleet: Fleet,
) -> bool:
    """Make the ``welcome`` playlist and assign it to ``group``, once; True when made now."""
    data_dir.mkdir(parents=True, exist_ok=True)
    mark = data_dir / MARK
    if mark.exists():
        return False
    if playlists.all() or schedules.all():
        mark.write_text("an upgrade: it had playlists or schedules already\n")
        return False
    data = welcome_picture(console_url)
    name = "welcome.png"
    with tempfile.NamedTemporaryFile(dir=data_dir, prefix="welcome-") as spooled:
        spooled.write(data)
        spooled.flush()
        probed = probe(Path(spooled.name), name)
        item = MediaItem(
            sha256=hashlib.sha256(data).hexdigest(),
            name=name,
            kind=probed.kind,
            mime=probed.mime,
            size=len(data),
            tags=["welcome"],
            width=probed.width,
            height=probed.height,
            uploader="install",
        )
        stored, _new = media.add(item, spooled, probed.thumbnail)
    playlists.put(
        PLAYLIST_ID,
        Playlist((Entry(media=stored.sha256, duration=60.0),), name="Welcome"),
    )
    fleet.assign(Assignment(PLAYLIST_ID, group=group))
    mark.write_text(f"made the playlist {PLAYLIST_ID} for the group {group}\n")
    log.info("made the first playlist %r, assigned to the group %r", PLAYLIST_ID, group)
    return True
