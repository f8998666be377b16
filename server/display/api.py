"""The Display Segment's HTTP endpoints (spec 4.1, INTERFACE.md) and its /x/ extensions.

Each endpoint's input is declared once, in the schemas below; handlers only call the display
(a :class:`server.display.port.DisplayPort`).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, current_app, request

from cds.errors import CdsError
from server.display.port import DisplayPort, SensorMessage, UnknownSensorError
from server.http import (
    ApiError,
    body_kind,
    invalid_field,
    json_response,
    read_json_object,
    read_xml_body,
)
from server.validation import HTTP, Anything, Duration, Field, Schema, String, Uri

log = logging.getLogger("pdn.display.api")

api = Blueprint("display", __name__)

# Inputs, one place per endpoint.
SCHEDULE_ITEM = Schema(
    Field("content-item", Uri(schemes=HTTP), required=True),
    Field("preferred-duration", Duration()),
)
SENSING = Schema(
    Field("sensor-id", String(max_length=200), required=True),
    Field("sensor-type", String(max_length=200)),
    Field("data", Anything()),
    Field("data-source", Uri()),
)
SUBSCRIPTION = Schema(Field("subscriber-uri", Uri(schemes=HTTP), required=True))


def validate_sensing(body: dict[str, Any]) -> dict[str, Any]:
    fields = SENSING.validate(body)
    if ("data" in fields) == ("data-source" in fields):
        which = "both" if "data" in fields else "neither"
        raise invalid_field(
            "data",
            f"A reading needs exactly one of 'data' and 'data-source'; this one has {which}.",
        )
    return fields


def display() -> DisplayPort:
    found: DisplayPort = current_app.extensions["pdn.display"]
    return found


@api.get("/")
def display_info() -> Response:
    return json_response(display().info())


@api.post("/schedule")
def schedule() -> Response:
    kind = body_kind()
    if kind == "xml":
        return _schedule_cds()
    if kind == "other":
        raise ApiError(
            415,
            "unsupported-media-type",
            "POST /schedule takes JSON (a content-item) or a CDS as text/xml,"
            f" not {request.mimetype}; send Content-Type: application/json or text/xml.",
        )
    fields = SCHEDULE_ITEM.validate(read_json_object())
    rejected = display().request_item(fields["content-item"], fields.get("preferred-duration"))
    if rejected is not None:
        return json_response({"request-status": "rejected", "reason": rejected.reason}, 202)
    return json_response({"request-status": "scheduling"}, 202)


def _schedule_cds() -> Response:
    target = display()
    if not target.accepts_cds:
        raise ApiError(
            415,
            "unsupported-media-type",
            "This display accepts single items only: send JSON with a content-item, not a CDS.",
        )
    data = read_xml_body()
    try:
        target.apply_cds(data)
    except CdsError as error:
        first = error.problems[0]
        raise ApiError(
            400,
            "invalid-cds",
            f"The CDS is not valid: {first}.",
            extra={
                "line": first.line,
                "problems": [
                    {"line": p.line, "element": p.element, "message": p.message}
                    for p in error.problems
                ],
            },
        ) from None
    return json_response({"request-status": "scheduling"}, 202)


@api.get("/sensing")
def list_sensors() -> Response:
    return json_response(display().sensors())


@api.post("/sensing")
def post_sensing() -> Response:
    fields = validate_sensing(read_json_object())
    try:
        display().record_sensing(
            SensorMessage(
                sensor_id=fields["sensor-id"],
                sensor_type=fields.get("sensor-type"),
                data=fields.get("data"),
                has_data="data" in fields,
                data_source=fields.get("data-source"),
            )
        )
    except UnknownSensorError:
        raise invalid_field(
            "sensor-type",
            f"Sensor '{fields['sensor-id']}' is new here: its first message needs 'sensor-type'.",
        ) from None
    return json_response({})


@api.get("/playback/")
def playback() -> Response:
    # GET requests normally take the fast path in server.display.PlaybackFastPath.
    return Response(display().playback_json(), mimetype="application/json")


@api.post("/playback/subscribe/")
def subscribe() -> Response:
    fields = SUBSCRIPTION.validate(read_json_object())
    display().subscribe(fields["subscriber-uri"])
    return json_response({}, 201)


@api.post("/playback/unsubscribe/")
def unsubscribe() -> Response:
    fields = SUBSCRIPTION.validate(read_json_object())
    if not display().unsubscribe(fields["subscriber-uri"]):
        raise ApiError(
            404,
            "not-subscribed",
            f"{fields['subscriber-uri']} is not subscribed to this display's playback.",
        )
    return json_response({})


# Extensions (/x/)


@api.get("/x/health")
def health() -> Response:
    body = display().health()
    return json_response(body, 200 if body["status"] == "ok" else 503)


@api.get("/x/screenshot")
def screenshot() -> Response:
    try:
        png = display().screenshot()
    except TimeoutError:
        raise ApiError(503, "screen-busy", "The screen did not answer within 5 s.") from None
    except RuntimeError as error:
        raise ApiError(503, "no-screen", f"No screenshot: {error}.") from None
    response = Response(png, mimetype="image/png")
    response.headers["Cache-Control"] = "no-store"
    return response
