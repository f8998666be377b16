"""A playlist's CDS made without a scheduler: what each entry's duration becomes, and an empty
playlist is still a CDS the displays take."""

from __future__ import annotations

from cds.model import ContentItem
from cds.parser import parse
from server.scheduler.media.store import MediaItem
from server.scheduler.playlists.document import cds_document
from server.scheduler.playlists.model import DEFAULT_SECONDS, read_playlist

CLIP = "c" * 64
PICTURE = "d" * 64


def durations(measured: float | None) -> list[float | None]:
    media = {
        CLIP: MediaItem(CLIP, "clip.mkv", "video", "video/x-matroska", 10, duration=measured),
        PICTURE: MediaItem(PICTURE, "p.png", "image", "image/png", 10),
    }
    playlist = read_playlist(
        {"items": [{"media": CLIP}, {"media": PICTURE}, {"media": CLIP, "duration": "3 s"}]}
    )
    items = parse(cds_document("p", playlist, media, "http://127.0.0.1:8090")).root.children
    return [item.constraints.preferred_duration for item in items if isinstance(item, ContentItem)]


def test_a_video_shows_for_its_length_and_a_picture_for_the_default() -> None:
    assert durations(4.25) == [4.25, DEFAULT_SECONDS, 3.0]
    # Unmeasured by the library: no preferred-duration, the display reads the file's length.
    assert durations(None) == [None, DEFAULT_SECONDS, 3.0]


def test_an_empty_playlist_is_an_empty_set_of_its_name() -> None:
    document = parse(cds_document("quiet", read_playlist({"items": []}), {}, "http://h"))
    assert document.root.name == "quiet" and document.root.children == []
