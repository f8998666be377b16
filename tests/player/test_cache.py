"""The content cache against a real HTTP server on 127.0.0.1 and real SQLite files."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cds.model import Hash, RequiredFile, Source
from player.cache import ContentCache
from player.cachefiles import FileSpec
from tests.player.conftest import LoopbackServer

BODY = bytes(range(256)) * 400  # 100 KiB


def spec_for(
    server: LoopbackServer, path: str, body: bytes = BODY, kind: str = "sha256"
) -> FileSpec:
    digest = hashlib.new(kind, body).hexdigest()
    return FileSpec(sources=(server.base + path,), hashes=((kind, digest.upper()),))


class Ready:
    """Collects on_ready callbacks (from the downloader threads)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.event = threading.Event()

    def __call__(self, spec: FileSpec, path: Path) -> None:
        assert path.exists()
        self.keys.append(spec.key)
        self.event.set()


@pytest.fixture
def make_cache(tmp_path: Path) -> Iterator[object]:
    made: list[ContentCache] = []

    def make(**options: object) -> ContentCache:
        settings: dict[str, object] = {"retry_initial": 0.2, "retry_max": 1.0}
        settings.update(options)
        cache = ContentCache(tmp_path / "data", **settings)  # type: ignore[arg-type]
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def test_hash_match_is_cached_and_reported(make_cache: object, http_server: LoopbackServer) -> None:
    http_server.served.files["/a.png"] = (BODY, "image/png")
    ready = Ready()
    cache: ContentCache = make_cache(on_ready=ready)  # type: ignore[operator]
    spec = spec_for(http_server, "/a.png")
    assert cache.path_for(spec) is None
    cache.wanted([spec])
    assert ready.event.wait(10)
    path = cache.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY
    assert path.suffix == ".png"  # Chromium tells a file:// type by its extension
    assert path.parent == cache.files_dir
    assert ready.keys == [spec.key]
    assert cache.is_ready(spec)
    assert list(cache.partial_dir.iterdir()) == []


def test_every_listed_hash_must_match(make_cache: object, http_server: LoopbackServer) -> None:
    http_server.served.files["/b.jpg"] = (BODY, "image/jpeg")
    cache: ContentCache = make_cache()  # type: ignore[operator]
    good = hashlib.md5(BODY, usedforsecurity=False).hexdigest()
    bad_sha1 = hashlib.sha1(b"something else", usedforsecurity=False).hexdigest()
    spec = FileSpec(
        sources=(http_server.base + "/b.jpg",), hashes=(("md5", good), ("sha1", bad_sha1))
    )
    cache.fetch(spec)
    assert cache.wait_idle(10)
    assert cache.path_for(spec) is None
    assert "sha1 mismatch" in (cache.last_error(spec) or "")
    assert list(cache.files_dir.iterdir()) == []
    assert list(cache.partial_dir.iterdir()) == []


def test_mismatch_is_discarded_then_retried_while_wanted(
    make_cache: object, http_server: LoopbackServer
) -> None:
    http_server.served.files["/c.png"] = (b"corrupted" + BODY[9:], "image/png")
    ready = Ready()
    cache: ContentCache = make_cache(on_ready=ready)  # type: ignore[operator]
    spec = spec_for(http_server, "/c.png", kind="sha1")
    cache.wanted([spec])
    assert cache.wait_idle(10)
    assert cache.path_for(spec) is None
    # The publisher fixes the file: the next retry gets it.
    http_server.served.files["/c.png"] = (BODY, "image/png")
    assert ready.event.wait(10)
    assert cache.path_for(spec) is not None


def test_first_source_down_second_up(make_cache: object, http_server: LoopbackServer) -> None:
    http_server.served.files["/mirror/d.png"] = (BODY, "image/png")
    cache: ContentCache = make_cache()  # type: ignore[operator]
    digest = hashlib.sha256(BODY).hexdigest()
    spec = FileSpec(
        sources=("http://127.0.0.1:1/d.png", http_server.base + "/mirror/d.png"),
        hashes=(("sha256", digest),),
    )
    cache.wanted([spec])
    assert cache.wait_idle(10)
    path = cache.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY


def test_served_after_the_server_is_gone_and_after_a_restart(
    make_cache: object, http_server: LoopbackServer, tmp_path: Path
) -> None:
    http_server.served.files["/e.webm"] = (BODY, "video/webm")
    cache: ContentCache = make_cache()  # type: ignore[operator]
    spec = spec_for(http_server, "/e.webm")
    cache.wanted([spec])
    assert cache.wait_idle(10)
    http_server.stop()
    assert cache.path_for(spec) is not None
    cache.close()
    # A reboot with no network: the index and the verified file are still there.
    again: ContentCache = make_cache()  # type: ignore[operator]
    again.wanted([spec])
    path = again.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY


def test_restart_drops_damaged_and_unindexed_files(
    make_cache: object, http_server: LoopbackServer
) -> None:
    http_server.served.files["/f.png"] = (BODY, "image/png")
    cache: ContentCache = make_cache()  # type: ignore[operator]
    spec = spec_for(http_server, "/f.png")
    cache.fetch(spec)
    assert cache.wait_idle(10)
    path = cache.path_for(spec)
    assert path is not None
    cache.close()
    path.write_bytes(BODY[:100])  # truncated behind the cache's back
    stray = cache.files_dir / "sha256-0000.png"
    stray.write_bytes(b"never verified")
    http_server.stop()
    again: ContentCache = make_cache()  # type: ignore[operator]
    assert again.path_for(spec) is None
    assert not stray.exists()


def test_partial_download_resumes_with_range(
    make_cache: object, http_server: LoopbackServer
) -> None:
    http_server.served.files["/g.bin"] = (BODY, "application/octet-stream")
    cache: ContentCache = make_cache()  # type: ignore[operator]
    spec = spec_for(http_server, "/g.bin")
    # What an interrupted download left behind.
    part = cache._partial_path(spec, spec.sources[0])
    part.write_bytes(BODY[:40000])
    cache.fetch(spec)
    assert cache.wait_idle(10)
    path = cache.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY
    assert ("/g.bin", "bytes=40000-") in http_server.served.requests


def test_server_without_range_gets_the_whole_file(
    make_cache: object, http_server: LoopbackServer
) -> None:
    http_server.served.files["/h.bin"] = (BODY, "application/octet-stream")
    http_server.served.no_range = True
    cache: ContentCache = make_cache()  # type: ignore[operator]
    spec = spec_for(http_server, "/h.bin")
    cache._partial_path(spec, spec.sources[0]).write_bytes(b"stale bytes")
    cache.fetch(spec)
    assert cache.wait_idle(10)
    path = cache.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY


def test_least_recently_used_unneeded_files_are_evicted(
    make_cache: object, http_server: LoopbackServer
) -> None:
    bodies = {name: bytes([n]) * 40_000 for n, name in enumerate("pqrs")}
    for name, body in bodies.items():
        http_server.served.files[f"/{name}.png"] = (body, "image/png")
    specs = {name: spec_for(http_server, f"/{name}.png", body) for name, body in bodies.items()}
    cache: ContentCache = make_cache(max_bytes=100_000)  # type: ignore[operator]
    cache.wanted([specs["p"], specs["q"]])
    assert cache.wait_idle(10)
    cache.path_for(specs["p"])  # p used after q: q is the least recently used
    cache._entries[specs["q"].key].last_used -= 100
    # The schedules change: p and q are no longer needed, r and s are.
    cache.wanted([specs["r"], specs["s"]])
    assert cache.wait_idle(10)
    assert cache.path_for(specs["r"]) is not None
    assert cache.path_for(specs["s"]) is not None
    assert cache.path_for(specs["q"]) is None  # evicted first
    assert cache.stats().bytes <= 100_000
    # Needed files are never evicted, even over the bound.
    cache.wanted([specs[n] for n in "prs"])
    assert cache.wait_idle(10)
    assert all(cache.path_for(specs[n]) is not None for n in "prs")


def test_file_source_and_no_hashes(make_cache: object, tmp_path: Path) -> None:
    source = tmp_path / "local.jpg"
    source.write_bytes(BODY)
    cache: ContentCache = make_cache()  # type: ignore[operator]
    spec = FileSpec(sources=(source.as_uri(),))
    cache.fetch(spec)
    assert cache.wait_idle(10)
    path = cache.path_for(spec)
    assert path is not None
    assert path.read_bytes() == BODY
    assert spec.key.startswith("url-")


def test_file_spec_from_the_cds_model() -> None:
    required = RequiredFile(
        sources=[Source("http://a.example/x.PNG"), Source("http://b.example/x.png")],
        hashes=[Hash("SHA1", "ABCDEF")],
    )
    spec = FileSpec.from_required_file(required)
    assert spec.sources == ("http://a.example/x.PNG", "http://b.example/x.png")
    assert spec.hashes == (("sha1", "abcdef"),)
    assert spec.key == "sha1-abcdef"
    assert spec.suffix == ".png"
    with pytest.raises(ValueError, match="unknown hash type"):
        FileSpec(sources=("http://x/",), hashes=(("crc32", "00"),))
    with pytest.raises(ValueError, match="hexadecimal"):
        FileSpec(sources=("http://x/",), hashes=(("md5", "xyz"),))
    with pytest.raises(ValueError, match="source"):
        FileSpec(sources=())


def test_the_strongest_listed_hash_names_the_file() -> None:
    hashes = (("md5", "aa"), ("sha256", "cc"), ("sha1", "bb"))
    assert FileSpec(sources=("http://x/",), hashes=hashes).key == "sha256-cc"
    assert FileSpec(sources=("http://x/",), hashes=hashes[:1] + hashes[2:]).key == "sha1-bb"
    assert FileSpec(sources=("http://x/",), hashes=hashes[:1]).key == "md5-aa"
