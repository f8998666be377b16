"""The console's library and playlist pages, and its way to the scheduler's JSON API.

The pages (``/console/library``, ``/console/library/<sha256>``, ``/console/playlists`` and
the playlist editor ``/console/playlists/<id>``) are server-rendered; their scripts
(``static/library.js``, ``static/editor.js``) upload, delete and save through the API itself,
reached under the console's own prefix: ``/console/x/media...``, ``/console/x/playlists...``,
``/console/media/...`` and ``/console/schedule/<id>/`` are handed to the scheduler's API app
with the operator's bearer token added. So a browser holds only the console's session cookie,
never the token, and the API's checks and error bodies are the ones the browser sees.

A change through that door needs the console's session (as every console page does) and the
header ``X-Requested-With: console``: a cross-site form cannot send it, and a cross-site
script cannot add it without a CORS preflight the scheduler never grants. The session cookie
is SameSite=Strict as well.

The display cards' "now" and "next" come from here too (:func:`now_and_next`): the item a
display reports playing, found in the library (its thumbnail) and in the playlist it belongs
to (the entry after it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from server.scheduler.media.api import item_body
from server.scheduler.media.store import MediaStore
from server.scheduler.playlists.document import entry_seconds
from server.scheduler.playlists.library import Playlists
from server.scheduler.playlists.model import ORDERS, PRIORITIES, TRANSITIONS
from server.scheduler.schedules import is_schedule_id
from server.scheduler.storage import SchedulerStorage

__all__ = ["API_ENDPOINTS", "add_library_pages", "now_and_next"]

#: The console's endpoints that answer as the API does (JSON, 401 rather than a redirect).
API_ENDPOINTS = frozenset(("api_x", "api_media", "api_schedule"))
CSRF_HEADER = "X-Requested-With"
_MEDIA_PATH = re.compile(r"/media/([0-9a-f]{64})/")
_FORWARDED = re.compile(r"^(media|playlists)(/[^/]+(/thumbnail)?)?$")

WsgiApp = Callable[..., Any]


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def media_of(url: str | None) -> str | None:
    """The SHA-256 in a library item's URL (``.../media/<sha256>/<name>``), else None."""
    found = _MEDIA_PATH.search(url or "")
    return found.group(1) if found else None


def now_and_next(
    card: dict[str, Any], media: MediaStore, playlists: Playlists, base: str
) -> dict[str, Any]:
    """``card`` (a display's status) with ``now`` and ``next``: each ``{"name", "thumbnail",
    "kind"}`` (``thumbnail`` a console URL or None) or None. ``now`` is a library item, or a
    playlist's web link; ``next`` is None unless the display plays a playlist in order."""

    def described(sha256: str | None, link: str | None) -> dict[str, Any] | None:
        item = media.get(sha256) if sha256 else None
        if item is not None:
            return {
                "name": item.name,
                "thumbnail": f"{base}/x/media/{item.sha256}/thumbnail"
                if item.kind in ("image", "video")
                else None,
                "kind": item.kind,
            }
        if link:
            return {"name": _host(link), "thumbnail": None, "kind": "link"}
        return None

    playing = card.get("playing") or {}
    item_url = playing.get("content-item")
    sha256 = media_of(item_url)
    upcoming = None
    set_name = playing.get("set")
    stored = playlists.get(set_name) if isinstance(set_name, str) and set_name else None
    # A page of a hand-written schedule keeps the card's own line; a playlist's link is named.
    now = described(sha256, item_url if stored is not None and not sha256 else None)
    if stored is not None and stored.playlist.order == "inorder" and stored.playlist.entries:
        entries = stored.playlist.entries
        for index, entry in enumerate(entries):
            if (sha256 and entry.media == sha256) or (not sha256 and entry.link == item_url):
                following = entries[(index + 1) % len(entries)]
                upcoming = described(following.media, following.link)
                break
    return {**card, "now": now, "next": upcoming}


def add_library_pages(
    app: Flask,
    *,
    api: WsgiApp,
    token: str | None,
    media: MediaStore,
    playlists: Playlists,
    storage: SchedulerStorage,
) -> None:
    """Install the library and playlist pages, and the door to the API, on the console."""

    def forward(path: str) -> BaseResponse:
        if request.method not in ("GET", "HEAD") and request.headers.get(CSRF_HEADER) != "console":
            return Response(
                '{"error": "not-from-the-console", "message": "Changes through the console'
                ' carry the header X-Requested-With: console; reload the page."}',
                status=403,
                mimetype="application/json",
            )
        environ = dict(request.environ)
        environ["SCRIPT_NAME"] = ""
        environ["PATH_INFO"] = path
        environ.pop("HTTP_AUTHORIZATION", None)
        if token:
            environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return Response.from_app(api, environ)

    @app.route("/x/<path:rest>", methods=["GET", "POST", "PUT", "DELETE"])
    def api_x(rest: str) -> BaseResponse:
        if not _FORWARDED.match(rest):
            abort(404)
        return forward(f"/x/{rest}")

    @app.get("/media/<path:rest>")
    def api_media(rest: str) -> BaseResponse:
        return forward(f"/media/{rest}")

    @app.get("/schedule/<schedule_id>/")
    def api_schedule(schedule_id: str) -> BaseResponse:
        if not is_schedule_id(schedule_id):
            abort(404)
        return forward(f"/schedule/{schedule_id}/")

    def items() -> list[dict[str, Any]]:
        return [
            item_body(item, **{"used-by": playlists.used_by(item.sha256)}) for item in media.items()
        ]

    @app.get("/library")
    def library_page() -> str:
        listed = items()
        return render_template(
            "console/library.html",
            items=listed,
            tags=sorted({tag for item in listed for tag in item["tags"]}),
            kinds=sorted({item["type"] for item in listed}),
            used=media.used(),
            quota=media.quota,
        )

    @app.get("/library/<sha256>")
    def media_item(sha256: str) -> str:
        item = media.get(sha256) if re.fullmatch(r"[0-9a-f]{64}", sha256) else None
        if item is None:
            abort(404)
        return render_template(
            "console/item.html",
            item=item_body(item, **{"used-by": playlists.used_by(item.sha256)}),
        )

    @app.get("/playlists")
    def playlists_page() -> str:
        listed = []
        for stored in playlists.all():
            found = playlists.media_of(stored.playlist)
            seconds = [
                entry_seconds(entry, found.get(entry.media) if entry.media else None)
                for entry in stored.playlist.entries
            ]
            listed.append(
                {
                    "id": stored.playlist_id,
                    "name": stored.playlist.name,
                    "count": len(seconds),
                    "seconds": sum(seconds),
                    "thumbnails": [
                        item.sha256
                        for item in (found.get(e.media or "") for e in stored.playlist.entries)
                        if item is not None and item.kind in ("image", "video")
                    ][:6],
                }
            )
        return render_template(
            "console/playlists.html", playlists=listed, error=request.args.get("error")
        )

    @app.post("/playlists")
    def new_playlist() -> BaseResponse:
        playlist_id = request.form.get("id", "").strip()
        if not is_schedule_id(playlist_id):
            return redirect(
                url_for(
                    "playlists_page",
                    error="A playlist id is 1 to 200 letters, digits, '.', '_' or '-',"
                    " not starting with '.' or '-'.",
                )
            )
        return redirect(url_for("playlist_editor", playlist_id=playlist_id))

    @app.get("/playlists/<playlist_id>")
    def playlist_editor(playlist_id: str) -> str:
        if not is_schedule_id(playlist_id):
            abort(404)
        stored = playlists.get(playlist_id)
        state = {
            "id": playlist_id,
            "exists": stored is not None,
            "playlist": stored.playlist.to_json()
            if stored
            else {"items": [], "order": "inorder", "priority": "medium"},
            "media": items(),
            "orders": list(ORDERS),
            "priorities": list(PRIORITIES),
            "transitions": list(TRANSITIONS),
        }
        return render_template(
            "console/playlist.html",
            playlist_id=playlist_id,
            exists=stored is not None,
            state=state,
            assigned=[a for a in storage.assignments() if a.schedule_id == playlist_id],
            displays=[d.url for d in storage.displays() if not d.pending],
            groups=sorted(storage.groups()),
        )
