"""The media library's HTTP face on the scheduler (docs/media.md, "API"):

POST   /x/media                   upload (raw body + X-Filename, or multipart ``file``), or a
                                  web link (JSON ``{"link", "name"}``)
GET    /x/media                   the items
GET    /x/media/<sha256>          one item, with the playlists that use it
GET    /x/media/<sha256>/thumbnail
DELETE /x/media/<sha256>          204, or 409 naming the playlists that use it
GET    /media/<sha256>/<name>     the bytes, for the displays: ETag, Range, immutable; for a
                                  page bundle, its member at that path

``/x/media`` is guarded as the scheduler's other operator routes are
(``server.scheduler.enrol.SchedulerAccess``). ``/media/...`` decides for itself: an open
scheduler (loopback only, no token) serves anyone; a closed one serves this machine
(127.0.0.1, ::1), a bearer token of the scheduler's, or the address of an approved display,
and nobody else.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, unquote, urlsplit

from flask import Flask, Response, request

from server.platform.http import ApiError, json_response, read_json_object
from server.scheduler.enrol import SchedulerAccess
from server.scheduler.media.bundle import check_bundle, member, member_type
from server.scheduler.media.links import canonical_link, link_key
from server.scheduler.media.playable import DISPLAY_KINDS, warnings_for
from server.scheduler.media.probe import BUNDLE_TYPES, Probed, RefusedError, check_name, probe
from server.scheduler.media.store import CHUNK, MediaItem, MediaStore, OverQuotaError
from server.scheduler.storage import SchedulerStorage

__all__ = ["MediaLimits", "add_media_routes", "item_body"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_BAD_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")
MAX_NAME = 200
MAX_TAGS = 20
MAX_TAG = 40
IMMUTABLE = "public, max-age=31536000, immutable"
#: Seconds a display host's looked-up addresses are kept.
RESOLVE_EVERY = 60.0


@dataclass(frozen=True)
class MediaLimits:
    """The largest file taken, and the most the whole library holds (bytes)."""

    max_bytes: int = 2 << 30
    quota: int = 20 << 30

    @classmethod
    def from_env(cls) -> MediaLimits:
        """``PDN_MEDIA_MAX_BYTES`` and ``PDN_MEDIA_QUOTA_BYTES``, else the defaults."""
        default = cls()
        return cls(
            max_bytes=int(os.environ.get("PDN_MEDIA_MAX_BYTES") or default.max_bytes),
            quota=int(os.environ.get("PDN_MEDIA_QUOTA_BYTES") or default.quota),
        )


#: What a page bundle's members are served with: the page runs in a sandbox of its own origin,
#: so its scripts cannot reach the scheduler's API or console with a browser's credentials.
PAGE_POLICY = "sandbox allow-scripts allow-forms allow-popups allow-modals"


def media_url(item: MediaItem) -> str:
    """Where a display gets the item: a link's own URL, a bundle's index.html, else the bytes."""
    if item.link is not None:
        return item.link
    if item.kind == "page":
        return f"/media/{item.sha256}/index.html"
    return f"/media/{item.sha256}/{quote(item.name)}"


def item_body(item: MediaItem, **extra: Any) -> dict[str, Any]:
    """An item as the API shows it."""
    return {
        "sha256": item.sha256,
        "name": item.name,
        "type": item.kind,
        "mime": item.mime,
        "size": item.size,
        "url": media_url(item),
        "tags": item.tags,
        "width": item.width,
        "height": item.height,
        "duration": item.duration,
        "codec": item.codec,
        "profile": item.profile,
        "fps": item.fps,
        "link": item.link,
        "uploader": item.uploader,
        "uploaded": item.uploaded,
        "warnings": item.warnings,
        **extra,
    }


def _name(given: str | None) -> str:
    if not given:
        raise ApiError(
            400,
            "no-name",
            "Give the file's name: the header 'X-Filename: <name>' with the raw body, or a"
            " multipart field 'file' with its filename.",
        )
    name = unquote(given).strip()
    if not name or name in (".", "..") or len(name) > MAX_NAME or _BAD_NAME.search(name):
        raise ApiError(
            400,
            "bad-name",
            f"The name must be 1 to {MAX_NAME} characters with no '/', '\\' or control characters.",
        )
    return name


def _tags(given: str | None) -> list[str]:
    tags = [tag.strip() for tag in (given or "").split(",") if tag.strip()]
    if len(tags) > MAX_TAGS or any(len(tag) > MAX_TAG or _BAD_NAME.search(tag) for tag in tags):
        raise ApiError(
            400, "bad-tags", f"At most {MAX_TAGS} tags, each at most {MAX_TAG} characters."
        )
    return list(dict.fromkeys(tags))


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "too-large",
        f"The file is over this scheduler's limit of {limit} bytes (PDN_MEDIA_MAX_BYTES).",
    )


def _spool(source: IO[bytes], into: IO[bytes], limit: int) -> tuple[str, int]:
    """Copy ``source`` into ``into``, hashing; 413 as soon as it passes ``limit``."""
    digest = hashlib.sha256()
    size = 0
    while piece := source.read(CHUNK):
        size += len(piece)
        if size > limit:
            raise _too_large(limit)
        digest.update(piece)
        into.write(piece)
    into.flush()
    return digest.hexdigest(), size


def _address_of(host: str) -> set[str]:
    try:
        return {str(ipaddress.ip_address(host.strip("[]")))}
    except ValueError:
        pass
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


#: This machine itself (other 127.x addresses count as other machines, as the scheduler's
#: token rules see them: tests/support/lan.py stands clients on them).
_THIS_MACHINE = frozenset(("127.0.0.1", "::1"))


def add_media_routes(
    app: Flask,
    store: MediaStore,
    storage: SchedulerStorage,
    access: SchedulerAccess,
    *,
    limits: MediaLimits,
    used_by: Callable[[str], list[str]] = lambda sha256: [],
    delete: Callable[[str, bool], list[str]] | None = None,
    display_kinds: Callable[[], list[str]] = lambda: list(DISPLAY_KINDS),
    spool_dir: Path | None = None,
) -> None:
    """Install the media routes on the scheduler's ``app``. ``used_by(sha256)``: the ids of the
    playlists that use an item; ``delete(sha256, force)``: delete it unless playlists use it
    (their ids returned, nothing deleted) or ``force`` (taken out of them too), [] when
    deleted (``server.scheduler.playlists``; default: delete it from the store);
    ``display_kinds()``: the kinds of display (``server.scheduler.media.playable``) a video is
    checked against."""

    def known(sha256: str) -> MediaItem:
        item = store.get(sha256) if _SHA256.match(sha256) else None
        if item is None:
            raise ApiError(404, "unknown-media", f"There is no media item {sha256}.")
        return item

    resolved: dict[str, tuple[float, frozenset[str]]] = {}  # host -> (when, its addresses)

    def addresses_of(host: str) -> frozenset[str]:
        """A display host's addresses, looked up at most once a minute (a name costs a DNS
        query, and a page's every member is a request)."""
        now = time.monotonic()
        known_for = resolved.get(host)
        if known_for is None or now - known_for[0] > RESOLVE_EVERY:
            known_for = (now, frozenset(_address_of(host)))
            if len(resolved) > 10_000:
                resolved.clear()
            resolved[host] = known_for
        return known_for[1]

    def may_read_bytes() -> None:
        address = request.remote_addr or ""
        if not access.closed or address in _THIS_MACHINE:
            return
        if request.headers.get("Authorization") and access.bearer() is not None:
            return
        for display in storage.displays():
            host = urlsplit(display.url).hostname
            if not display.pending and host and address in addresses_of(host):
                return
        raise ApiError(
            403,
            "forbidden",
            "Media is served to this scheduler's approved displays only (or with its token).",
        )

    def uploader() -> str:
        return "operator" if access.bearer() == "operator" else "loopback"

    def refused(error: RefusedError) -> ApiError:
        return ApiError(error.status, error.error, error.message)

    def stored(item: MediaItem, body: IO[bytes] | None, thumb: bytes | None) -> Response:
        try:
            kept, new = store.add(item, body, thumb)
        except OverQuotaError:
            raise _over_quota(store.quota) from None
        return json_response(item_body(kept), 201 if new else 200)

    def add_link() -> Response:
        body = read_json_object()
        try:
            link = canonical_link(body.get("link"))
        except RefusedError as error:
            raise refused(error) from error
        given = body.get("name")
        if given is not None and not isinstance(given, str):
            raise ApiError(400, "bad-name", "The link's name is a string.")
        name = _name(given or urlsplit(link).hostname)
        tags = body.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise ApiError(400, "bad-tags", "The link's tags are a list of strings.")
        item = MediaItem(
            sha256=link_key(link),
            name=name,
            kind="link",
            mime="text/html",
            size=0,
            tags=_tags(",".join(tags)),
            uploader=uploader(),
            link=link,
        )
        return stored(item, None, None)

    @app.post("/x/media")
    def upload_media() -> Response:
        if request.mimetype == "application/json":
            return add_link()
        with tempfile.NamedTemporaryFile(dir=spool_dir, prefix="upload-") as spooled:
            if request.mimetype == "multipart/form-data":
                if (request.content_length or 0) > limits.max_bytes + CHUNK:
                    raise _too_large(limits.max_bytes)
                request.max_content_length = limits.max_bytes + CHUNK
                given = request.files.get("file")
                name = _name(given.filename if given is not None else None)
                assert given is not None
                tags = _tags(request.form.get("tags"))
                sha256, size = _spool(given.stream, spooled, limits.max_bytes)
            else:
                name = _name(request.headers.get("X-Filename"))
                tags = _tags(request.headers.get("X-Tags"))
                if (request.content_length or 0) > limits.max_bytes:
                    raise _too_large(limits.max_bytes)
                request.max_content_length = limits.max_bytes + 1
                sha256, size = _spool(request.stream, spooled, limits.max_bytes)
            path = Path(spooled.name)
            try:
                ext = check_name(path, name)
            except RefusedError as error:
                raise refused(error) from error
            existing = store.get(sha256)
            if existing is not None:
                return json_response(item_body(existing), 200)
            if store.used() + size > store.quota:
                raise _over_quota(store.quota)
            item = MediaItem(
                sha256=sha256, name=name, kind="", mime="", size=size, tags=tags,
                uploader=uploader(),
            )  # fmt: skip
            try:
                if ext in BUNDLE_TYPES:
                    bundle = check_bundle(path, name)
                    item = replace(item, kind="page", mime=BUNDLE_TYPES[ext][1], root=bundle.root)
                    return stored(item, spooled, None)
                probed = probe(path, name)
            except RefusedError as error:
                raise refused(error) from error
            return stored(_probed(item, probed, display_kinds()), spooled, probed.thumbnail)

    @app.get("/x/media")
    def list_media() -> Response:
        items = store.items()
        return json_response(
            {
                "items": [item_body(item) for item in items],
                "used": sum(item.size for item in items),
                "quota": store.quota,
                "max-bytes": limits.max_bytes,
            }
        )

    @app.get("/x/media/<sha256>")
    def get_media(sha256: str) -> Response:
        item = known(sha256)
        return json_response(item_body(item, **{"used-by": used_by(sha256)}))

    @app.get("/x/media/<sha256>/thumbnail")
    def get_media_thumbnail(sha256: str) -> Response:
        known(sha256)
        data = store.thumbnail(sha256)
        if data is None:
            raise ApiError(404, "no-thumbnail", f"Media item {sha256} has no thumbnail.")
        response = app.response_class(data, mimetype="image/jpeg")
        response.headers["Cache-Control"] = IMMUTABLE
        return response

    @app.delete("/x/media/<sha256>")
    def delete_media(sha256: str) -> Response:
        known(sha256)
        force = request.args.get("force") in ("1", "true")
        if delete is not None:
            users = delete(sha256, force)
        else:
            users = [] if force else used_by(sha256)
            if not users:
                store.delete(sha256)
        if users:
            raise ApiError(
                409,
                "in-use",
                f"Media item {sha256} is used by playlists {', '.join(users)}; take it out of"
                " them first, or delete with ?force=1.",
                extra={"playlists": users},
            )
        return app.response_class(status=204)

    def page_member(item: MediaItem, path: str) -> Response:
        found = member(store.open(item), item.root or "", path)
        if found is None:
            raise ApiError(404, "not-found", f"The page bundle {item.sha256} has no '{path}'.")
        size, pieces = found
        headers = {
            "Cache-Control": IMMUTABLE,
            "Content-Length": str(size),
            "Content-Security-Policy": PAGE_POLICY,
            "X-Content-Type-Options": "nosniff",
        }
        return app.response_class(
            pieces, content_type=member_type(path), headers=headers, direct_passthrough=True
        )

    @app.get("/media/<sha256>/<path:name>")
    def media_bytes(sha256: str, name: str) -> Response:
        may_read_bytes()
        item = known(sha256)
        if item.kind == "page":
            return page_member(item, name)
        if item.link is not None:
            raise ApiError(
                404, "not-found", f"Media item {sha256} is a web link: displays open {item.link}."
            )
        headers = {
            "Cache-Control": IMMUTABLE,
            "Accept-Ranges": "bytes",
            "ETag": f'"{item.sha256}"',
        }
        if request.if_none_match.contains(item.sha256):
            return app.response_class(status=304, headers=headers)
        start, stop, status = 0, item.size, 200
        if request.range is not None:
            bounds = request.range.range_for_length(item.size)
            if bounds is None or item.size == 0:
                raise ApiError(
                    416,
                    "bad-range",
                    f"The range asked for is not within the item's {item.size} bytes.",
                    headers={"Content-Range": f"bytes */{item.size}"},
                )
            start, stop = bounds
            status = 206
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{item.size}"
        headers["Content-Length"] = str(stop - start)
        return app.response_class(
            store.read(item.sha256, start, stop),
            status=status,
            mimetype=item.mime,
            headers=headers,
            direct_passthrough=True,
        )


def _probed(item: MediaItem, probed: Probed, kinds: list[str]) -> MediaItem:
    """``item`` with what the probe found, and a video's warnings for the displays of ``kinds``."""
    return replace(
        item,
        kind=probed.kind,
        mime=probed.mime,
        width=probed.width,
        height=probed.height,
        duration=probed.duration,
        codec=probed.codec,
        profile=probed.profile,
        fps=probed.fps,
        warnings=warnings_for(
            probed.codec, probed.profile, probed.width, probed.height, probed.fps, kinds
        )
        if probed.kind == "video"
        else [],
    )


def _over_quota(quota: int) -> ApiError:
    return ApiError(
        507,
        "over-quota",
        f"The media library would pass its quota of {quota} bytes (PDN_MEDIA_QUOTA_BYTES);"
        " delete items it no longer needs.",
    )
