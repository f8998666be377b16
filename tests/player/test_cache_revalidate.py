"""Files without hashes change at their address: conditional revalidation against a real HTTP
server on 127.0.0.1 that changes the file, and per-file progress and reasons for health."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from player.cache import ContentCache
from player.cachedcontent import CachedContent
from player.cachefiles import CacheConfig, FileSpec, parse_cache_config, parse_size
from tests.support.pages import PageServer, Reply, Request
from tests.support.waiting import wait_until

V1 = b"\x89PNG menu, version one " * 2000
V2 = b"\x89PNG menu, version two!" * 50_000  # over two 256 KiB reads: progress shows


@dataclass
class Version:
    body: bytes
    etag: str | None = None
    last_modified: str | None = None
    gate: threading.Event | None = None  # set: the second half may be sent


@dataclass
class Origin:
    """A web server whose files the test replaces; it honours If-None-Match/If-Modified-Since."""

    files: dict[str, Version] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    base: str = ""

    def requests_for(self, path: str) -> list[tuple[dict[str, str], int]]:
        return [(headers, status) for p, headers, status in self.seen if p == path]

    def answer(self, request: Request) -> Reply:
        version = self.files.get(request.path)
        if version is None:
            self.seen.append((request.path, request.headers, 404))
            return Reply(404)
        match = version.etag and request.headers.get("If-None-Match") == version.etag
        unchanged = version.last_modified and (
            request.headers.get("If-Modified-Since") == version.last_modified
        )
        if match or (unchanged and not version.etag):
            self.seen.append((request.path, request.headers, 304))
            return Reply(304)
        self.seen.append((request.path, request.headers, 200))
        headers = {"Content-Length": str(len(version.body))}
        if version.etag:
            headers["ETag"] = version.etag
        if version.last_modified:
            headers["Last-Modified"] = version.last_modified
        return Reply(200, halves(version), "image/png", headers)


def halves(version: Version) -> Iterator[bytes]:
    """The body in two halves, the second once the version's gate (if any) is set."""
    half = len(version.body) // 2
    yield version.body[:half]
    if version.gate is not None:
        version.gate.wait(20)
    yield version.body[half:]


@pytest.fixture
def origin() -> Iterator[Origin]:
    state = Origin()
    with PageServer(keep_alive=True) as server:
        server.handle(state.answer)
        state.base = server.url
        yield state


@pytest.fixture
def make_cache(tmp_path: Path) -> Iterator[Callable[..., ContentCache]]:
    made: list[ContentCache] = []

    def make(**options: Any) -> ContentCache:
        settings: dict[str, Any] = {"retry_initial": 0.2, "retry_max": 1.0, "revalidate_floor": 0}
        settings.update(options)
        cache = ContentCache(tmp_path / "data", **settings)
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def fetched(cache: ContentCache, file: FileSpec) -> Path:
    """The file's path once it is in the cache and its download is over: the entry is set a
    moment before the download's job is done, and a revalidation asked for in that moment is
    not queued (the job is still there)."""
    path = wait_until(lambda: cache.path_for(file))
    assert cache.wait_idle(10)
    return Path(path)


def spec(origin: Origin, path: str = "/menu.png") -> FileSpec:
    return FileSpec(sources=(origin.base + path,))  # no hashes: cached by URL


def test_a_replaced_file_is_fetched_again_on_a_schedule_change(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    origin.files["/menu.png"] = Version(V1, etag='"v1"')
    cache = make_cache()
    menu = spec(origin)
    cache.wanted([menu])
    first = fetched(cache, menu)
    assert first.read_bytes() == V1
    # Unchanged: a conditional request, answered 304; the same copy stays.
    cache.wanted([menu])
    wait_until(lambda: len(origin.requests_for("/menu.png")) == 2 and cache.wait_idle(5))
    headers, status = origin.requests_for("/menu.png")[-1]
    assert (headers.get("If-None-Match"), status) == ('"v1"', 304)
    assert cache.path_for(menu) == first
    # Replaced at the same address: the next schedule change brings the new version in,
    # under a new name (the renderer's next load gets a new URL); the old copy is gone.
    origin.files["/menu.png"] = Version(V2, etag='"v2"')
    cache.wanted([menu])
    second = wait_until(lambda: (p := cache.path_for(menu)) != first and p)
    assert cache.wait_idle(10)  # the old copy is deleted just after the new one is in
    assert second.read_bytes() == V2
    assert second.suffix == ".png"
    assert not first.exists()
    assert sorted(p.name for p in cache.files_dir.iterdir()) == [second.name]
    assert list(cache.partial_dir.iterdir()) == []


def test_validators_survive_a_restart_and_last_modified_works_alone(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    stamp = formatdate(time.time() - 3600, usegmt=True)
    origin.files["/menu.png"] = Version(V1, last_modified=stamp)
    cache = make_cache()
    menu = spec(origin)
    cache.wanted([menu])
    first = fetched(cache, menu)
    cache.close()
    again = make_cache()
    again.wanted([menu])
    wait_until(lambda: len(origin.requests_for("/menu.png")) == 2 and again.wait_idle(5))
    headers, status = origin.requests_for("/menu.png")[-1]
    assert (headers.get("If-Modified-Since"), status) == (stamp, 304)
    assert again.path_for(menu) == first


def test_periodic_revalidation_without_a_schedule_change(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    origin.files["/menu.png"] = Version(V1, etag='"v1"')
    cache = make_cache(revalidate_every=0.3, revalidate_floor=3600)
    menu = spec(origin)
    ready: list[Path] = []
    cache.on_ready = lambda _spec, path: ready.append(path)
    cache.wanted([menu])
    first = fetched(cache, menu)
    origin.files["/menu.png"] = Version(V2, etag='"v2"')
    cache.wanted([menu])  # within the floor: no check from this
    second = wait_until(lambda: (p := cache.path_for(menu)) != first and p)
    assert cache.wait_idle(10)  # the old copy is deleted just after the new one is in
    assert second.read_bytes() == V2
    # The engine is told (from the downloader thread, just after the swap), so it re-evaluates.
    assert wait_until(lambda: bool(ready) and ready[-1] == second)


def test_a_server_without_validators_is_compared_by_content(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    origin.files["/menu.png"] = Version(V1)
    cache = make_cache()
    menu = spec(origin)
    cache.wanted([menu])
    first = fetched(cache, menu)
    assert cache.revalidate() == 1
    wait_until(lambda: len(origin.requests_for("/menu.png")) == 2 and cache.wait_idle(5))
    assert cache.path_for(menu) == first  # the same bytes: the copy stays
    origin.files["/menu.png"] = Version(V2)
    cache.revalidate()
    assert wait_until(lambda: (p := cache.path_for(menu)) != first and p).read_bytes() == V2


def test_progress_the_old_copy_plays_until_the_swap_and_reasons(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    origin.files["/menu.png"] = Version(V1, etag='"v1"')
    cache = make_cache()
    content = CachedContent(cache)
    menu = spec(origin)
    missing = spec(origin, "/gone.png")
    cache.wanted([menu, missing])
    first = fetched(cache, menu)
    gate = threading.Event()
    origin.files["/menu.png"] = Version(V2, etag='"v2"', gate=gate)
    cache.revalidate()

    def menu_status() -> dict[str, Any]:
        downloads = content.status()["downloads"]
        return next(d for d in downloads if d["url"].endswith("/menu.png"))

    during = wait_until(
        lambda: (s := menu_status())["state"] == "revalidating" and s["received"] and s
    )
    assert 0 < during["received"] <= len(V2) // 2
    assert during["total"] == len(V2)
    assert cache.path_for(menu) == first  # the old copy still plays
    assert first.read_bytes() == V1
    gate.set()
    wait_until(lambda: cache.path_for(menu) != first)
    # The file that cannot be fetched: failing, with the reason, in health's cache section.
    status = wait_until(
        lambda: (
            (s := content.status()) and any(d["state"] == "failed" for d in s["downloads"]) and s
        )
    )
    gone = next(d for d in status["downloads"] if d["url"].endswith("/gone.png"))
    assert "HTTP 404" in gone["error"]
    assert gone["attempts"] >= 1
    assert status["failing"] == 1
    assert (status["wanted"], status["ready"]) == (2, 1)
    # Ready once the revalidation's job is done (a moment after the new copy is in).
    assert wait_until(lambda: menu_status()["state"] == "ready")
    assert menu_status()["checked"] is not None


def test_a_failed_revalidation_keeps_the_copy_and_says_why(
    origin: Origin, make_cache: Callable[..., ContentCache]
) -> None:
    origin.files["/menu.png"] = Version(V1, etag='"v1"')
    cache = make_cache()
    menu = spec(origin)
    cache.wanted([menu])
    first = fetched(cache, menu)
    del origin.files["/menu.png"]
    cache.revalidate()
    entry = wait_until(lambda: (s := cache.stats().files_wanted[0]).get("error") and s)
    assert entry["error"] == "revalidation failed: HTTP 404"
    assert entry["state"] == "ready"
    assert cache.path_for(menu) == first


def test_cache_config() -> None:
    assert parse_cache_config({}) == CacheConfig()
    config = parse_cache_config({"max-size": "500 MB", "revalidate": "5 minutes"})
    assert (config.max_bytes, config.revalidate_every) == (500_000_000, 300.0)
    assert parse_cache_config({"max_size": "2 GiB"}).max_bytes == 2 * 1024**3
    assert parse_size("750M") == 750 * 1024**2
    assert parse_size(10 * 1024**2) == 10 * 1024**2
    for bad, message in (
        ({"max-size": "lots"}, "max-size"),
        ({"max-size": "2 parsecs"}, "unknown unit"),
        ({"max-size": "1 kB"}, "too small"),
        ({"revalidate": "1 second"}, "at least 10 seconds"),
        ({"revalidate": "soon"}, "revalidate"),
        ({"size": "2 GiB"}, "unknown key"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_cache_config(bad)


def test_the_display_config_takes_a_cache_section(tmp_path: Path) -> None:
    from player.config import ConfigError, load_config

    path = tmp_path / "display.toml"
    path.write_text('[cache]\nmax-size = "3 GiB"\nrevalidate = "1 hour"\n')
    config = load_config(path, environ={})
    assert config.cache == CacheConfig(3 * 1024**3, 3600.0)
    assert load_config(None, environ={}).cache == CacheConfig()
    path.write_text('[cache]\nmax-size = "huge"\n')
    with pytest.raises(ConfigError, match="max-size"):
        load_config(path, environ={})
