"""Which scheduled items may play, and what the renderer loads (docs/cds.md, "Files").

An item whose file has hashes, or is not a web page (an image, a video), plays only from the
content cache (``player.cache``), once downloaded and verified; the renderer then loads the
local copy. A web page without hashes is loaded live (the renderer's failure report and the
engine's back-off cover it being unreachable), and so are a ticker (its feed or text file is
read by the ticker itself, ``player.feeds``), a clock and a live stream, always
(``cds.streams``): it has no file to fetch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cds.layouts import native_kind
from cds.model import ContentItem, ContentSet
from cds.streams import is_stream
from player.cache import ContentCache
from player.cachefiles import FileSpec
from player.medialength import LengthCache

HTML_TYPES = ("text/html", "application/xhtml+xml")


class CachedContent:
    """The content cache as the engine (``available``, ``locate``) and the display see it."""

    def __init__(self, cache: ContentCache) -> None:
        self.cache = cache
        self._lengths = LengthCache()

    @staticmethod
    def needs_cache(item: ContentItem) -> bool:
        if not item.files:
            return False
        if item.url.startswith("data:"):  # an image or a text carried in the CDS itself
            return False
        if native_kind(item.content_type) is not None:  # a ticker reads its feed itself
            return False
        if is_stream(item.url, item.content_type):  # played live from its source
            return False
        if item.files[0].hashes:
            return True
        media = (item.content_type or "").split(";")[0].strip().lower()
        return bool(media) and media not in HTML_TYPES

    @staticmethod
    def _spec(item: ContentItem) -> FileSpec:
        return FileSpec.from_required_file(item.files[0], item.size)

    def available(self, item: ContentItem) -> bool:
        return not self.needs_cache(item) or self.cache.is_ready(self._spec(item))

    def locate(self, item: ContentItem) -> str:
        if self.needs_cache(item):
            path = self.cache.path_for(self._spec(item))
            if path is not None:
                return Path(path).as_uri()
        return item.url

    def natural_length(self, item: ContentItem) -> float | None:
        """A cached video's own length from its file's header (a synchronised set's grid
        needs it before the video plays); None until the file is here and verified."""
        if not self.needs_cache(item) or not self.available(item):
            return None
        return self._lengths.of_url(self.locate(item))

    def documents_changed(self, documents: list[ContentSet]) -> None:
        specs = [
            self._spec(item)
            for document in documents
            for item in document.walk_items()
            if self.needs_cache(item)
        ]
        self.cache.wanted(specs)

    def status(self) -> dict[str, Any]:
        stats = self.cache.stats()
        wanted = stats.files_wanted
        return {
            "files": stats.files,
            "bytes": stats.bytes,
            "max-bytes": stats.max_bytes,
            "queued": stats.queued,
            "failing": len(stats.failing),
            "wanted": len(wanted),
            "ready": sum(1 for f in wanted if f["state"] in ("ready", "revalidating")),
            "revalidate-every": self.cache.revalidate_every,
            # Per file the schedules need: state (ready, queued, downloading, failed,
            # revalidating), bytes received of total while downloading, the last failure.
            "downloads": wanted,
        }

    def close(self) -> None:
        self.cache.close()
