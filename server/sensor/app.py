"""The Environment Segment's HTTP API (spec 4.4; docs/interface.md, "Environment Segment"): one
sensor.

GET  /             the current reading: sensor-id, sensor-type, data (a string) or data-source
POST /subscribe    push readings to subscriber-uri (durable; idempotent)
POST /unsubscribe

Closed beyond loopback, like the scheduler: with ``PDN_API_TOKEN`` set, subscribing and
unsubscribing need ``Authorization: Bearer <token>`` (``server.platform.http.require_token``). With
no token, a sensor listening on loopback only is open, as the spec shows it; one listening on any
other address takes no subscription at all (401, saying to set the token).
"""

from __future__ import annotations

from typing import Protocol

from flask import Flask, Response, request

from server.platform.http import (
    ApiError,
    create_base_app,
    json_response,
    read_json_object,
    require_token,
)
from server.platform.validation import HTTP, Field, Schema, SigningSecret, Uri
from server.sensor.source import SensorLoop

SUBSCRIBE = Schema(
    Field("subscriber-uri", Uri(schemes=HTTP), required=True),
    Field("signing-secret", SigningSecret()),  # signed updates (Standard Webhooks)
)
TOPIC = "sensor"


class Subscriptions(Protocol):
    """The part of the durable outbox the API needs (server.platform.outbox.Outbox has it)."""

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool: ...

    def unsubscribe(self, topic: str, uri: str) -> bool: ...


def create_app(
    loop: SensorLoop,
    subscriptions: Subscriptions,
    *,
    token: str | None = None,
    beyond_loopback: bool = False,
) -> Flask:
    """The sensor's Flask app; ``beyond_loopback``: it listens on an address others reach."""
    app = create_base_app("pdn.sensor", openapi="sensor")
    require_token(app, lambda: token, service="sensor")

    @app.before_request
    def _closed_without_token() -> None:
        if token or not beyond_loopback or request.method in ("GET", "HEAD", "OPTIONS"):
            return
        raise ApiError(
            401,
            "unauthorized",
            "This sensor listens beyond loopback and has no token, so it takes no"
            " subscriptions: set PDN_API_TOKEN in its environment, then send"
            " 'Authorization: Bearer <token>'.",
            headers={"WWW-Authenticate": 'Bearer realm="pdn sensor"'},
        )

    @app.get("/")
    def current() -> Response:
        reading = loop.latest
        if reading is None:
            raise ApiError(
                503,
                "no-reading",
                f"The sensor has no reading yet; its source ({loop.source.describe()}) "
                "could not be read. The log says why.",
            )
        return json_response(reading.info_body(loop.sensor_id, loop.sensor_type))

    @app.post("/subscribe")
    def subscribe() -> Response:
        fields = SUBSCRIBE.validate(read_json_object())
        if subscriptions.subscribe(TOPIC, fields["subscriber-uri"], fields.get("signing-secret")):
            # A new subscriber gets the current reading now rather than an interval later
            # (the others get a harmless repeat of a reading they already have).
            loop.publish_current()
        return json_response({}, 201)

    @app.post("/unsubscribe")
    def unsubscribe() -> Response:
        fields = SUBSCRIBE.validate(read_json_object())
        if not subscriptions.unsubscribe(TOPIC, fields["subscriber-uri"]):
            raise ApiError(
                404,
                "not-subscribed",
                f"{fields['subscriber-uri']} is not subscribed to this sensor.",
            )
        return json_response({}, 200)

    return app
