"""Scheduled files play from the content cache once verified; web pages play live."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cds.parser import parse
from cds.playlist import Playlist
from player.cache import ContentCache
from player.cachedcontent import CachedContent
from player.engine import Engine
from player.store import DisplayStore
from tests.player.test_engine import ManualRenderer
from tests.support.pages import PageServer, Reply
from tests.support.waiting import wait_until

IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


@pytest.fixture
def files() -> Iterator[str]:
    """A file server that answers IMAGE at every path."""
    with PageServer(default=Reply(200, IMAGE, "image/png")) as server:
        yield server.url


def item(url: str, content_type: str, digest: str | None = None) -> str:
    hashes = f'<hashes><hash type="sha256">{digest}</hash></hashes>' if digest else ""
    return (
        f'<content-item content-type="{content_type}"><requires-file>{hashes}'
        f"<sources><uri>{url}</uri></sources></requires-file></content-item>"
    )


def test_files_play_from_the_cache_once_verified(tmp_path: Path, files: str) -> None:
    good = hashlib.sha256(IMAGE).hexdigest()
    woken = threading.Event()
    cache = ContentCache(tmp_path, on_ready=lambda spec, path: woken.set())
    content = CachedContent(cache)
    store = DisplayStore(tmp_path / "display.db")
    renderer = ManualRenderer()
    engine = Engine(
        clock=lambda: datetime.now(UTC),
        schedule=Playlist(UTC),
        store=store,
        renderer=renderer,
        available=content.available,
        locate=content.locate,
    )
    document = parse(
        f'<content-set name="lobby">{item(files + "/a.png", "image/png", good)}</content-set>'
    ).root
    try:
        engine.set_documents([document])
        content.documents_changed([document])
        engine.tick()
        assert renderer.idle == 1 and renderer.shows == []  # not cached yet: not eligible
        assert woken.wait(10)
        engine.tick()
        shown = renderer.last
        assert shown.source_url == files + "/a.png"
        assert shown.url.startswith("file://")
        assert Path(shown.url.removeprefix("file://")).read_bytes() == IMAGE
        assert content.status()["files"] == 1
    finally:
        cache.close()
        store.close()


def test_a_file_failing_its_hash_never_plays_but_pages_play_live(
    tmp_path: Path, files: str
) -> None:
    cache = ContentCache(tmp_path, retry_initial=60)
    content = CachedContent(cache)
    bad = "0" * 64
    document = parse(
        f'<content-set name="lobby">{item(files + "/a.png", "image/png", bad)}'
        f"{item('http://example.org/page', 'text/html')}</content-set>"
    ).root
    try:
        content.documents_changed([document])
        picture, page = document.walk_items()
        assert content.needs_cache(picture) and not content.needs_cache(page)
        assert content.available(page) and content.locate(page) == "http://example.org/page"
        # Discarded after download: the hash did not match.
        wait_until(lambda: cache.stats().failing, 10, "the file failing", step=0.05)
        assert not content.available(picture)
        assert content.locate(picture) == files + "/a.png"
    finally:
        cache.close()
