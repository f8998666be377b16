"""Bringing one file of the content cache onto the disk, and checking it.

No index and no lock here: ``player.cache`` decides which file to fetch from which source and
installs what these functions leave in a part file. A download over HTTP resumes a part file
with ``Range`` where the server allows it (``206`` with a matching ``Content-Range``), else
starts again; a conditional request (``If-None-Match`` / ``If-Modified-Since``) answered 304
raises :class:`NotModifiedError`. Every part file is flushed to the disk before it is checked,
so what is installed after a power cut is what was verified.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import requests

from player.cachefiles import FileSpec

log = logging.getLogger("pdn.cache")

CHUNK = 256 * 1024


class CacheError(Exception):
    """A download that did not produce a verified file; the message says why."""


class NotModifiedError(Exception):
    """A conditional request answered 304: the cached copy is current."""


@dataclass
class Transfer:
    """A download under way, as health reports it, and the validators its answer came with."""

    received: int = 0
    total: int | None = None
    etag: str | None = None
    last_modified: str | None = None


def copy_local(source: str, part: Path) -> None:
    """Copy a ``file:`` source into ``part``."""
    path = Path(unquote(urlsplit(source).path))
    try:
        with path.open("rb") as src, part.open("wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
            dst.flush()
            os.fsync(dst.fileno())
    except OSError as error:
        part.unlink(missing_ok=True)
        raise CacheError(f"cannot read {path}: {error.strerror or error}") from error


def fetch_http(
    session: requests.Session,
    source: str,
    part: Path,
    *,
    limit: int,
    expected_size: int | None,
    timeout: tuple[float, float],
    transfer: Transfer | None = None,
    conditions: dict[str, str] | None = None,
) -> bool:
    """Download ``source`` into ``part``, resuming it when the server agrees. True if resumed.

    A body over ``limit`` bytes is refused. With ``conditions`` (If-None-Match,
    If-Modified-Since) a 304 raises :class:`NotModifiedError`. The answer's validators and the
    progress go to ``transfer``."""
    offset = part.stat().st_size if part.exists() else 0
    if offset > limit:
        part.unlink()
        offset = 0
    headers: dict[str, str] = {"Accept-Encoding": "identity", **(conditions or {})}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with session.get(source, headers=headers, stream=True, timeout=timeout) as response:
            status = response.status_code
            if transfer is not None:
                transfer.etag = response.headers.get("ETag") or None
                transfer.last_modified = response.headers.get("Last-Modified") or None
            if status == 304 and conditions:
                raise NotModifiedError
            mode = "wb"
            if offset and status == 206:
                content_range = response.headers.get("Content-Range", "")
                if not content_range.startswith(f"bytes {offset}-"):
                    raise CacheError(f"unexpected Content-Range {content_range!r}")
                mode = "ab"
            elif offset and status == 416:
                return True  # the partial file is already whole: verify it
            elif status != 200:
                raise CacheError(f"HTTP {status}")
            written = offset if mode == "ab" else 0
            if transfer is not None:
                length = response.headers.get("Content-Length", "")
                transfer.total = written + int(length) if length.isdigit() else expected_size
                transfer.received = written
            with part.open(mode) as out:
                for chunk in response.iter_content(CHUNK):
                    written += len(chunk)
                    if transfer is not None:
                        transfer.received = written
                    if written > limit:
                        out.close()
                        part.unlink(missing_ok=True)
                        raise CacheError(f"larger than {limit} bytes")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            return mode == "ab"
    except requests.RequestException as error:
        raise CacheError(type(error).__name__ + ": " + short(error)) from error
    except OSError as error:
        raise CacheError(f"cannot write {part.name}: {error}") from error


def fetch_verified(
    session: requests.Session,
    spec: FileSpec,
    source: str,
    part: Path,
    *,
    max_bytes: int,
    timeout: tuple[float, float],
    transfer: Transfer | None = None,
) -> None:
    """Bring ``source`` (``file``, ``http`` or ``https``) into ``part`` and verify it: a part
    file that fails is deleted and :class:`CacheError` says why."""
    scheme = urlsplit(source).scheme.lower()
    if scheme not in ("file", "http", "https"):
        raise CacheError(f"unsupported scheme {scheme!r}")

    def bring() -> bool:
        if scheme == "file":
            copy_local(source, part)
            return False
        limit = spec.size if spec.size is not None else max_bytes
        return fetch_http(
            session,
            source,
            part,
            limit=limit,
            expected_size=spec.size,
            timeout=timeout,
            transfer=transfer,
        )

    resumed = bring()
    try:
        verify(spec, part)
    except CacheError:
        part.unlink(missing_ok=True)
        if not resumed:
            raise
        # A resumed file may have joined two versions of the source: once more, whole.
        log.info("resumed download of %s failed verification: fetching it whole", spec.key)
        bring()
        try:
            verify(spec, part)
        except CacheError:
            part.unlink(missing_ok=True)
            raise


def verify(spec: FileSpec, part: Path) -> None:
    """Raise :class:`CacheError` unless ``part`` has the size and every hash ``spec`` lists."""
    size = part.stat().st_size
    if spec.size is not None and size != spec.size:
        raise CacheError(f"size {size} bytes, expected {spec.size}")
    if not spec.hashes:
        return
    digests = {kind: hashlib.new(kind, usedforsecurity=False) for kind, _ in spec.hashes}
    with part.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            for digest in digests.values():
                digest.update(chunk)
    for kind, expected in spec.hashes:
        actual = digests[kind].hexdigest()
        if actual != expected:
            log.error(
                "hash mismatch for %s: %s is %s, expected %s: file discarded",
                spec.sources[0],
                kind,
                actual,
                expected,
            )
            raise CacheError(f"{kind} mismatch (got {actual})")


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename in it) to the disk, where the system allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def same_content(one: Path, other: Path) -> bool:
    """Whether two files hold the same bytes (False when either cannot be read)."""
    try:
        if one.stat().st_size != other.stat().st_size:
            return False
        digests = []
        for path in (one, other):
            digest = hashlib.sha256()
            with path.open("rb") as stream:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
            digests.append(digest.digest())
    except OSError:
        return False
    return digests[0] == digests[1]


def short(error: Any) -> str:
    """An error's text, cut to 200 characters for logs and health."""
    text = str(error)
    return text if len(text) <= 200 else text[:197] + "..."
