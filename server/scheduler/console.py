"""The console at ``/console/``: the fleet in a browser, server-rendered (Jinja), offline.

A Flask app of its own, mounted at ``/console`` in front of the scheduler's API
(``SchedulerService``), so it is no part of the API's OpenAPI document. Everything it serves is
its own (``templates/console``, ``static/console.css`` and ``console.js``); its
Content-Security-Policy allows nothing from elsewhere.

When the scheduler has an operator token, every page asks for it once (``/console/signin``;
10 wrong tokens a minute lock the address out, as the API does) and then carries a cookie
(HttpOnly, SameSite=Strict: no other site can send it, so no other site can post a form here;
Secure over HTTPS) holding a random session id, kept server-side
(``server.scheduler.sessions``): signing out ends that session, "Sign out everywhere" ends them
all, 12 hours unused end one, and changing the token ends them all. The API itself keeps
``Authorization: Bearer``. A scheduler listening beyond loopback with no operator token
serves no console page (401, saying to set one).

The displays page shows displays waiting for approval (registered without the enrolment
token), with a button to approve each, and "Add a display": its URL and the code shown on its
screen (the scheduler pairs with it, ``server.scheduler.enrol``).

Pages: the displays (thumbnail, online state, now playing; live through server-sent events at
``/console/events``, polling ``/console/fleet.json`` when the stream is refused), a display
(status, health, schedules, groups, recent plays, its next 24 hours), schedules with an editor
that validates on save and shows the line at fault, assignments, groups, broadcasts with their
per-screen confirmations, and plays per item per day. The media library and the playlist
editor are ``server.scheduler.consolemedia``'s; each display card shows what plays now and
what comes next there.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Generator
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from flask import Flask, Response, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from cds.errors import CdsError
from server.platform.clockspread import clock_spread, describe_spread
from server.platform.eventstream import EventStream, comment, event, opening, stream_response
from server.platform.http import ApiError
from server.platform.lockout import TOKEN_GUESSES, Lockout
from server.platform.validation import ValidationError
from server.scheduler.broadcast import BROADCAST, DEFAULT_TIMEOUT, Broadcasts
from server.scheduler.consolecharts import plays_per_item_per_day, timeline
from server.scheduler.consolemedia import API_ENDPOINTS, WsgiApp, add_library_pages, now_and_next
from server.scheduler.fleet import Fleet
from server.scheduler.fleetapi import GROUP_NAME, GROUP_NAME_TEXT, playlist_conflict
from server.scheduler.fleetstatus import FleetStatus, thumbnail_response
from server.scheduler.media.store import MediaStore
from server.scheduler.playlists.library import Playlists
from server.scheduler.schedules import ScheduleLibrary, is_schedule_id
from server.scheduler.sessions import ConsoleSessions
from server.scheduler.storage import Assignment, ScheduleConflictError, SchedulerStorage

COOKIE = "pdn_console"
MAX_STREAMS = 4  # each live page holds one of the API server's worker threads
HEARTBEAT = 15.0
RECENT_PLAYS = 25
NEW_SCHEDULE = """<?xml version="1.0" encoding="UTF-8"?>
<content-set name="{id}" type="inline">
  <content-item content-type="text/html">
    <requires-file><sources><uri>https://example.org/</uri></sources></requires-file>
  </content-item>
</content-set>
"""
# Frames: a web link's preview shows that link (the operator's own page, sandboxed); nothing
# else the console shows comes from elsewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'; frame-src 'self' http: https:"
)

Redirect = BaseResponse


def clock_text(clock: Any) -> str:
    """A display's clock on its card: its offset from its time source (console.js: clock)."""
    if not isinstance(clock, dict) or clock.get("offset-ms") is None:
        source = clock.get("source") if isinstance(clock, dict) else None
        return f"offset unknown ({source})" if source and source != "unknown" else "unknown"
    offset = clock["offset-ms"]
    text = f"{'+' if offset >= 0 else ''}{offset:g} ms ({clock.get('source')})"
    return f"{text}, not synchronised" if clock.get("synchronised") is False else text


def _time(text: Any) -> str:
    """An ISO date-time (or a Unix time) as 'HH:MM:SS' (UTC) when today, else
    'YYYY-MM-DD HH:MM'."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = datetime.fromtimestamp(text, UTC)
    elif not isinstance(text, str) or not text:
        return "–"
    else:
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
    value = value.astimezone(UTC) if value.tzinfo else value
    if value.date() == datetime.now(UTC).date():
        return value.strftime("%H:%M:%S")
    return value.strftime("%Y-%m-%d %H:%M")


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def create_console_app(
    *,
    storage: SchedulerStorage,
    library: ScheduleLibrary,
    fleet: Fleet,
    status: FleetStatus,
    broadcasts: Broadcasts,
    token: str | None = None,
    closed: bool = False,
    approve: Callable[[str], str] | None = None,
    add_display: Callable[[str, str], str | None] | None = None,
    sessions: ConsoleSessions | None = None,
    media: MediaStore | None = None,
    playlists: Playlists | None = None,
    api: WsgiApp | None = None,
) -> Flask:
    """``closed`` with no ``token``: every page is refused. ``approve(url)`` and
    ``add_display(url, code)`` (ApiError when refused) back the displays page's buttons.
    ``sessions``: where sign-ins are kept (needed with a ``token``). ``media``, ``playlists``
    and ``api`` (the scheduler's API, a WSGI app) back the library and playlist pages
    (``server.scheduler.consolemedia``)."""
    app = Flask(
        __name__,
        template_folder="templates",
        static_folder="static",
        static_url_path="/static",
    )
    app.jinja_env.filters["time"] = _time
    app.jinja_env.filters["clock"] = clock_text
    app.jinja_env.filters["host"] = _host
    app.jinja_env.filters["q"] = lambda text: quote(str(text), safe="")
    streams = threading.BoundedSemaphore(MAX_STREAMS)
    if token and sessions is None:
        raise ValueError("a console with an operator token needs its sessions")
    signins = sessions if token else None
    guesses = Lockout(limit=TOKEN_GUESSES[0], window=TOKEN_GUESSES[1])

    @app.after_request
    def _headers(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        if response.mimetype == "text/html":
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.before_request
    def _signed_in() -> Redirect | None:
        if signins is None and closed and request.endpoint != "static":
            return Response(
                "This scheduler listens beyond loopback and has no operator token: set"
                " PDN_API_TOKEN in its environment (install.sh makes one) and restart it.\n",
                status=401,
                mimetype="text/plain",
            )
        if signins is None or request.endpoint in ("signin", "static"):
            return None
        if signins.valid(request.cookies.get(COOKIE, "")):
            return None
        if request.endpoint in API_ENDPOINTS:
            return Response(
                '{"error": "signed-out", "message": "The console session has ended: reload'
                ' the page and sign in again."}',
                status=401,
                mimetype="application/json",
            )
        if request.method == "GET" and request.endpoint not in ("events", "fleet_json"):
            here = request.script_root + request.full_path.rstrip("?")
            return redirect(url_for("signin", next=here))
        abort(401)

    @app.context_processor
    def _common() -> dict[str, Any]:
        return {
            "signed_in": signins is not None,
            "section": request.endpoint,
            "pages": app.view_functions,
        }

    # -- signing in ---------------------------------------------------------------------------

    @app.route("/signin", methods=["GET", "POST"])
    def signin() -> Response | Redirect | str:
        target = request.values.get("next") or url_for("displays")
        if not target.startswith("/") or target.startswith("//"):
            target = url_for("displays")
        if signins is None:
            return redirect(target)
        error = None
        wait = guesses.retry_after(request.remote_addr or "")
        if request.method == "POST" and wait is not None:
            error = f"Too many wrong tokens from this address; try again in {wait} s."
        elif request.method == "POST":
            given = request.form.get("token", "")
            if token is not None and hmac.compare_digest(given.encode(), token.encode()):
                guesses.succeeded(request.remote_addr or "")
                response = redirect(target)
                # A browser-session cookie: the session itself ends server-side.
                response.set_cookie(
                    COOKIE,
                    signins.open(),
                    httponly=True,
                    samesite="Strict",
                    secure=request.is_secure,
                    path=request.script_root or "/",
                )
                return response
            guesses.failed(request.remote_addr or "")
            error = "That is not the scheduler's operator token."
        page = render_template("console/signin.html", error=error, next=target)
        return Response(page, status=401 if error else 200, mimetype="text/html")

    @app.post("/signout")
    def signout() -> Redirect:
        if signins is not None:
            signins.close(request.cookies.get(COOKIE, ""))
        response = redirect(url_for("signin"))
        response.delete_cookie(COOKIE, path=request.script_root or "/")
        return response

    @app.post("/signout-everywhere")
    def signout_everywhere() -> Redirect:
        if signins is not None:
            signins.close_all()
        response = redirect(url_for("signin"))
        response.delete_cookie(COOKIE, path=request.script_root or "/")
        return response

    # -- displays -------------------------------------------------------------------------------

    def annotate(card: dict[str, Any]) -> dict[str, Any]:
        if media is None or playlists is None:
            return card
        return now_and_next(card, media, playlists, request.script_root)

    def cards() -> list[dict[str, Any]]:
        return [annotate(card) for card in status.snapshot()]

    @app.get("/")
    def displays() -> str:
        shown = cards()
        return render_template(
            "console/displays.html",
            displays=shown,
            clocks=describe_spread(clock_spread(shown)) if shown else None,
            error=request.args.get("error"),
            added=request.args.get("added"),
            can_add=add_display is not None,
        )

    @app.post("/displays/approve")
    def approve_display() -> Redirect:
        url = registered(request.form.get("display"))
        if approve is not None:
            approve(url)
        return redirect(url_for("displays"))

    @app.post("/displays/add")
    def add_new_display() -> Redirect:
        url = request.form.get("url", "").strip().rstrip("/")
        code = request.form.get("code", "").strip()
        if add_display is None:
            abort(404)
        if not url.startswith(("http://", "https://")) or not code:
            return redirect(url_for("displays", error="Give the display's URL and its code."))
        try:
            add_display(url, code)
        except ApiError as error:
            return redirect(url_for("displays", error=error.message))
        return redirect(url_for("displays", added=url))

    @app.get("/fleet.json")
    def fleet_json() -> Response:
        return app.response_class(
            app.json.dumps({"revision": status.revision, "displays": cards()}),
            mimetype="application/json",
        )

    @app.get("/events")
    def events() -> Response:
        if not streams.acquire(blocking=False):
            return Response("too many live pages", status=503, mimetype="text/plain")
        root = request.script_root
        body = _FleetStream(
            status,
            storage,
            lambda card: (
                now_and_next(card, media, playlists, root)
                if media is not None and playlists is not None
                else card
            ),
        )
        body.on_close(streams.release)
        return stream_response(body)

    def registered(given: str | None) -> str:
        display = storage.display(given) if given else None
        if display is None:
            abort(404)
        return display.url

    @app.get("/thumbnail")
    def thumbnail() -> Response:
        url = registered(request.args.get("display"))
        found = status.thumbnail(url)
        if found is None:
            abort(404)
        return thumbnail_response(*found)

    @app.post("/thumbnail")
    def take_thumbnail() -> Response | Redirect:
        url = registered(request.args.get("display") or request.form.get("display"))
        status.refresh_thumbnail(url)
        if request.headers.get("X-Requested-With") == "console":
            return Response(status=204)
        return redirect(request.referrer or url_for("display", url=url))

    @app.get("/display")
    def display() -> str:
        url = registered(request.args.get("url"))
        record = storage.display(url)
        now = datetime.now(UTC)
        documents = fleet.documents_for(url)
        plays = storage.plays(url, time.time() - 7 * 24 * 3600, None)
        state = status.status_json(url)
        state["name"] = record.name if record else None
        state = annotate(state)
        return render_template(
            "console/display.html",
            display=record,
            state=state,
            groups=storage.display_groups(url),
            schedules=storage.schedules_for(url),
            direct=[a for a in storage.assignments() if a.display == url],
            documents=[document.name for document in documents],
            timeline=timeline(documents, now),
            plays=list(reversed(plays[-RECENT_PLAYS:])),
            all_schedules=[s.schedule_id for s in library.all()],
        )

    # -- schedules ------------------------------------------------------------------------------

    @app.get("/schedules")
    def schedules() -> str:
        return schedules_page(None)

    def schedules_page(error: str | None) -> str:
        assigned: dict[str, list[str]] = {}
        for assignment in storage.assignments():
            target = (
                f"group {assignment.group}" if assignment.group else _host(assignment.display or "")
            )
            assigned.setdefault(assignment.schedule_id, []).append(target)
        return render_template(
            "console/schedules.html", schedules=library.all(), assigned=assigned, error=error
        )

    @app.post("/schedules")
    def new_schedule() -> Response | Redirect | str:
        schedule_id = request.form.get("id", "").strip()
        if not is_schedule_id(schedule_id):
            page = render_template(
                "console/schedules.html",
                schedules=library.all(),
                assigned={},
                error="A schedule id is 1 to 200 letters, digits, '.', '_' or '-', "
                "not starting with '.' or '-'.",
            )
            return Response(page, status=400, mimetype="text/html")
        return redirect(url_for("schedule", schedule_id=schedule_id))

    def editor(
        schedule_id: str, text: str, problems: list[dict[str, Any]], status_code: int = 200
    ) -> Response:
        lines = text.splitlines()
        fault = next((p["line"] for p in problems if p["line"]), None)
        page = render_template(
            "console/schedule.html",
            schedule_id=schedule_id,
            text=text,
            exists=library.get(schedule_id) is not None,
            problems=problems,
            fault=fault,
            excerpt=[
                (number, lines[number - 1])
                for number in range(max(1, (fault or 1) - 3), min(len(lines), (fault or 1) + 3) + 1)
            ]
            if fault
            else [],
            saved=request.args.get("saved") is not None,
            displays=[d.url for d in storage.displays()],
            groups=sorted(storage.groups()),
        )
        return Response(page, status=status_code, mimetype="text/html")

    @app.get("/schedules/<schedule_id>")
    def schedule(schedule_id: str) -> Response:
        if not is_schedule_id(schedule_id):
            abort(404)
        stored = library.get(schedule_id)
        text = (
            stored.xml.decode("utf-8", "replace") if stored else NEW_SCHEDULE.format(id=schedule_id)
        )
        return editor(schedule_id, text, [])

    @app.post("/schedules/<schedule_id>")
    def save_schedule(schedule_id: str) -> Response | Redirect:
        if not is_schedule_id(schedule_id):
            abort(404)
        text = request.form.get("cds", "").replace("\r\n", "\n")
        try:
            library.put(schedule_id, text.encode())
        except ScheduleConflictError as conflict:  # a playlist's: changed as a playlist
            message = playlist_conflict(conflict).message
            problem = {"line": None, "element": None, "message": message, "text": message}
            return editor(schedule_id, text, [problem], 409)
        except CdsError as error:
            problems = [
                {"line": p.line, "element": p.element, "message": p.message, "text": str(p)}
                for p in error.problems
            ]
            return editor(schedule_id, text, problems, 400)
        return redirect(url_for("schedule", schedule_id=schedule_id, saved=1))

    @app.post("/schedules/<schedule_id>/delete")
    def delete_schedule(schedule_id: str) -> Redirect | Response:
        if is_schedule_id(schedule_id):
            try:
                library.delete(schedule_id)
            except ScheduleConflictError as conflict:
                return Response(
                    schedules_page(playlist_conflict(conflict).message), 409, mimetype="text/html"
                )
        return redirect(url_for("schedules"))

    # -- assignments and groups -----------------------------------------------------------------

    def assignment_from_form() -> Assignment:
        schedule_id = request.form.get("schedule", "")
        target = request.form.get("target", "")
        kind, _, value = target.partition(":")
        if library.get(schedule_id) is None:
            raise ValueError(f"There is no schedule '{schedule_id}'.")
        if kind == "display":
            return Assignment(schedule_id, display=registered(value))
        if kind == "group" and GROUP_NAME.match(value):
            return Assignment(schedule_id, group=value)
        raise ValueError(f"Choose a display or a group ({GROUP_NAME_TEXT}).")

    def back(default: str) -> Redirect:
        target = request.form.get("back", "")
        if target.startswith("/") and not target.startswith("//"):
            return redirect(target)
        return redirect(default)

    @app.get("/assignments")
    def assignments() -> str:
        return render_template(
            "console/assignments.html",
            assignments=storage.assignments(),
            schedules=[s.schedule_id for s in library.all()],
            displays=storage.displays(),
            groups=sorted(storage.groups()),
            error=request.args.get("error"),
        )

    @app.post("/assignments")
    def assign() -> Redirect:
        try:
            assignment = assignment_from_form()
        except ValueError as error:
            return redirect(url_for("assignments", error=str(error)))
        if request.form.get("action") == "remove":
            fleet.unassign(assignment)
        else:
            fleet.assign(assignment)
        return back(url_for("assignments"))

    @app.get("/groups")
    def groups() -> str:
        return render_template(
            "console/groups.html",
            groups=storage.groups(),
            displays=storage.displays(),
            error=request.args.get("error"),
        )

    @app.post("/groups")
    def group_member() -> Redirect:
        url = registered(request.form.get("display"))
        group = request.form.get("group", "").strip()
        if not GROUP_NAME.match(group):
            return redirect(url_for("groups", error=f"A group name is {GROUP_NAME_TEXT}."))
        if request.form.get("action") == "remove":
            fleet.remove_from_group(url, group)
        else:
            fleet.add_to_group(url, group)
        return back(url_for("groups"))

    # -- broadcasts and plays -------------------------------------------------------------------

    @app.get("/broadcasts")
    def broadcasts_page() -> str:
        now = time.time()
        return render_template(
            "console/broadcasts.html",
            broadcasts=[b.report(now) for b in reversed(broadcasts.all())],
            groups=sorted(storage.groups()),
            error=request.args.get("error"),
        )

    @app.post("/broadcasts")
    def broadcast() -> Redirect:
        try:
            fields = BROADCAST.validate(
                {
                    "group": request.form.get("group", ""),
                    "content-item": request.form.get("item", ""),
                    "duration": request.form.get("duration", ""),
                }
            )
            broadcasts.start(
                fields["group"], fields["content-item"], fields["duration"], DEFAULT_TIMEOUT
            )
        except (ValidationError, ApiError) as error:
            return redirect(url_for("broadcasts_page", error=error.message))
        return redirect(url_for("broadcasts_page"))

    @app.get("/plays")
    def plays() -> str:
        today = date.today()
        records = storage.plays(None, time.time() - 8 * 24 * 3600, None)
        return render_template(
            "console/plays.html", chart=plays_per_item_per_day(records, today), total=len(records)
        )

    if media is not None and playlists is not None and api is not None:
        add_library_pages(
            app, api=api, token=token, media=media, playlists=playlists, storage=storage
        )
    return app


class _FleetStream(EventStream):
    """One console page's live feed: every display's status first, then each change."""

    def __init__(
        self,
        status: FleetStatus,
        storage: SchedulerStorage,
        annotate: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        super().__init__()
        self._status = status
        self._storage = storage
        self._annotate = annotate

    def _event(self, url: str, revision: int) -> bytes:
        body = self._status.status_json(url)
        record = self._storage.display(url)
        body["name"] = record.name if record else None
        return event("display", revision, _json(self._annotate(body)))

    def events(self) -> Generator[bytes]:
        yield opening("fleet status")
        after = self._status.revision
        yield b"".join(self._event(d.url, after) for d in self._storage.displays())
        while not self.closed:
            revision, changed = self._status.changes(after, HEARTBEAT)
            if not changed:
                yield comment("heartbeat")
                continue
            after = revision
            yield b"".join(self._event(url, revision) for url in changed)


def _json(body: Any) -> str:
    import json

    return json.dumps(body, separators=(",", ":"))
