"""The Scheduling and Management Segment's HTTP API (spec 4.3; docs/interface.md,
"Scheduling and Management Segment").

GET  /displays                       registry (url-only: JSON body field or query parameter)
POST /displays                       register a display (a change needs proof: registration)
GET  /schedule/<id>/                 the schedule, a CDS, as text/xml
POST /schedule/<id>/subscribe/       push updates of this schedule to subscriber-uri
POST /schedule/<id>/unsubscribe/
GET  /x/schedules                    extension: the schedules being served
and the fleet's extensions (assignment, groups, API-written schedules): server.scheduler.fleetapi
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from flask import Flask, Response, request

from server.platform.http import ApiError, create_base_app, json_response, read_json_object
from server.platform.validation import (
    HTTP,
    Boolean,
    Field,
    QueryBoolean,
    Schema,
    SigningSecret,
    Uri,
)
from server.scheduler.enrol import SchedulerAccess, add_enrolment_routes
from server.scheduler.fleet import Fleet
from server.scheduler.fleetapi import add_fleet_routes
from server.scheduler.registration import Registrar, RegistrationPolicy
from server.scheduler.schedules import ScheduleLibrary, is_schedule_id
from server.scheduler.storage import SchedulerStorage

SUBSCRIBE = Schema(
    Field("subscriber-uri", Uri(schemes=HTTP), required=True),
    Field("signing-secret", SigningSecret()),  # signed updates (Standard Webhooks)
)
LIST_DISPLAYS = Schema(Field("url-only", Boolean()))
LIST_DISPLAYS_QUERY = Schema(Field("url-only", QueryBoolean()))


class Subscriptions(Protocol):
    """The part of the durable outbox the API needs (server.platform.outbox.Outbox has it)."""

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool: ...

    def unsubscribe(self, topic: str, uri: str) -> bool: ...


def document_etag(xml: bytes) -> str:
    """The strong ETag of a served schedule (unquoted): the SHA-256 of its bytes, hex."""
    return hashlib.sha256(xml).hexdigest()


def schedule_topic(schedule_id: str) -> str:
    return f"schedule:{schedule_id}"


def create_app(
    storage: SchedulerStorage,
    library: ScheduleLibrary,
    subscriptions: Subscriptions,
    *,
    on_register: Callable[[str, list[str] | None], None] = lambda url, groups: None,
    on_pin: Callable[[str, str], None] = lambda url, pin: None,
    on_paired: Callable[[str, str, str | None], None] = lambda url, token, pin: None,
    token: str | None = None,
    access: SchedulerAccess | None = None,
    fleet: Fleet | None = None,
    registration: RegistrationPolicy | None = None,
) -> Flask:
    """``on_register(url, groups)`` after each registration of an approved display, and at its
    approval (groups None: none declared); ``on_paired(url, token, pin)`` when the scheduler
    paired with a display. ``access``: who may change what (default: ``token`` as the operator
    token, on loopback); ``registration``: the pending cap and the rate of registrations
    (``server.scheduler.registration``)."""
    app = create_base_app("pdn.scheduler", openapi="scheduler")
    access = access or SchedulerAccess(operator_token=token)
    registrar = Registrar(
        storage, access, on_register=on_register, on_pin=on_pin, policy=registration
    )
    app.extensions["pdn.access"] = access
    app.extensions["pdn.token-guard"] = access.guard
    app.before_request(access.check)
    if fleet is not None:
        add_fleet_routes(app, storage, library, fleet)

    def paired(url: str, token: str, pin: str | None) -> None:
        on_paired(url, token, pin)
        on_register(url, None)

    add_enrolment_routes(
        app, storage, on_approve=lambda url: on_register(url, None), on_paired=paired
    )

    def known_schedule(schedule_id: str) -> None:
        if not is_schedule_id(schedule_id) or library.get(schedule_id) is None:
            raise ApiError(
                404,
                "unknown-schedule",
                f"There is no schedule '{schedule_id}'; it is the file "
                f"{schedule_id}.xml in the scheduler's schedules directory.",
            )

    @app.get("/displays")
    def list_displays() -> Response:
        fields: dict[str, Any] = {}
        if request.args.get("url-only") is not None:
            fields.update(LIST_DISPLAYS_QUERY.validate({"url-only": request.args["url-only"]}))
        fields.update(LIST_DISPLAYS.validate(read_json_object(required=False)))
        url_only = fields.get("url-only", True)
        records = []
        for display in storage.displays():
            if display.pending:  # not in the registry until an operator approves it
                continue
            record: dict[str, Any] = {
                "url": display.url,
                "location": display.location,
                # Until the display tells its name (GET /), its address is the friendly name.
                "name": display.name or urlsplit(display.url).netloc,
            }
            if not url_only:
                record["sensors"] = display.sensors
            records.append(record)
        return json_response(records)

    @app.post("/displays")
    def register_display() -> Response:
        return registrar.register()

    @app.get("/schedule/<id>/")
    def get_schedule(id: str) -> Response:  # the spec's name for it
        schedule_id = id
        known_schedule(schedule_id)
        schedule = library.get(schedule_id)
        assert schedule is not None
        response = app.response_class(schedule.xml, status=200, mimetype="text/xml")
        # Strong: the hash of the bytes served (``digest`` is the source file's, which differs
        # when the root content-set was given the id as its name). If-None-Match -> 304.
        response.set_etag(document_etag(schedule.xml))
        response.make_conditional(request)
        return response

    @app.post("/schedule/<id>/subscribe/")
    def subscribe(id: str) -> Response:  # the spec's name for it
        schedule_id = id
        known_schedule(schedule_id)
        fields = SUBSCRIBE.validate(read_json_object())
        subscriptions.subscribe(
            schedule_topic(schedule_id), fields["subscriber-uri"], fields.get("signing-secret")
        )
        return json_response({}, 201)

    @app.post("/schedule/<id>/unsubscribe/")
    def unsubscribe(id: str) -> Response:  # the spec's name for it
        schedule_id = id
        fields = SUBSCRIBE.validate(read_json_object())
        if not subscriptions.unsubscribe(schedule_topic(schedule_id), fields["subscriber-uri"]):
            raise ApiError(
                404,
                "not-subscribed",
                f"{fields['subscriber-uri']} is not subscribed to schedule '{schedule_id}'.",
            )
        return json_response({}, 200)

    @app.get("/x/schedules")
    def list_schedules() -> Response:
        return json_response(
            [
                {
                    "id": schedule.schedule_id,
                    "name": schedule.root_name,
                    "url": f"{request.host_url}schedule/{schedule.schedule_id}/",
                    "digest": schedule.digest,
                }
                for schedule in library.all()
            ]
        )

    return app
