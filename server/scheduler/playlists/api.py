"""The playlists' HTTP face on the scheduler (docs/fleet.md, "Playlists"):

PUT    /x/playlists/<id>    a playlist (JSON): 201 new, 200 replaced; 400 naming the field (an
                            unknown media item too), 409 when a hand-written schedule has the id
GET    /x/playlists         every playlist, in short
GET    /x/playlists/<id>    one playlist, with how long each entry shows and its CDS's URL
DELETE /x/playlists/<id>    204, or 404

A playlist is a schedule of the same id: ``GET /schedule/<id>/`` serves its CDS, and it is
assigned with ``POST /x/assignments`` as any schedule is. The routes are guarded as the
scheduler's other operator routes are (``server.scheduler.enrol.SchedulerAccess``).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response

from server.platform.http import ApiError, json_response, read_json_object
from server.scheduler.fleetapi import playlist_conflict
from server.scheduler.playlists.document import entry_seconds
from server.scheduler.playlists.library import Playlists, StoredPlaylist, UnknownMediaError
from server.scheduler.playlists.model import read_playlist
from server.scheduler.schedules import is_schedule_id
from server.scheduler.storage import ScheduleConflictError

__all__ = ["add_playlist_routes"]


def add_playlist_routes(app: Flask, playlists: Playlists) -> None:
    def playlist_id(given: str) -> str:
        if not is_schedule_id(given):
            raise ApiError(
                400,
                "invalid-playlist-id",
                "A playlist id is a schedule id: 1 to 200 letters, digits, '.', '_' or '-',"
                " not starting with '.' or '-'.",
            )
        return given

    def body(stored: StoredPlaylist) -> dict[str, Any]:
        media = playlists.media_of(stored.playlist)
        seconds = [
            entry_seconds(entry, media.get(entry.media) if entry.media else None)
            for entry in stored.playlist.entries
        ]
        return {
            "id": stored.playlist_id,
            **stored.playlist.to_json(),
            "seconds": seconds,
            "duration": round(sum(seconds), 3),
            "updated": stored.updated,
            "schedule": f"/schedule/{stored.playlist_id}/",
        }

    @app.put("/x/playlists/<id>")
    def put_playlist(id: str) -> Response:
        name = playlist_id(id)
        playlist = read_playlist(read_json_object())
        try:
            created = playlists.put(name, playlist)
        except UnknownMediaError as unknown:
            raise ApiError(
                400,
                "unknown-media",
                f"items[{unknown.index}] names media item {unknown.sha256}, which the library"
                " does not hold: upload it first (POST /x/media).",
                field=f"items[{unknown.index}].media",
            ) from None
        except ScheduleConflictError as conflict:
            raise playlist_conflict(conflict) from None
        stored = playlists.get(name)
        assert stored is not None
        response = json_response(body(stored), 201 if created else 200)
        if created:
            response.headers["Location"] = f"/x/playlists/{name}"
        return response

    @app.get("/x/playlists")
    def list_playlists() -> Response:
        listed = []
        for stored in playlists.all():
            full = body(stored)
            listed.append(
                {
                    key: full[key]
                    for key in ("id", "order", "priority", "duration", "updated", "schedule")
                }
                | {"name": stored.playlist.name, "count": len(stored.playlist.entries)}
            )
        return json_response(listed)

    @app.get("/x/playlists/<id>")
    def get_playlist(id: str) -> Response:
        stored = playlists.get(playlist_id(id))
        if stored is None:
            raise ApiError(404, "unknown-playlist", f"There is no playlist '{id}'.")
        return json_response(body(stored))

    @app.delete("/x/playlists/<id>")
    def delete_playlist(id: str) -> Response:
        if not playlists.delete(playlist_id(id)):
            raise ApiError(404, "unknown-playlist", f"There is no playlist '{id}'.")
        return Response(status=204)
