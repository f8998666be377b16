"""The Environment Segment's HTTP API (spec 4.4, INTERFACE.md): one sensor.

GET  /             the current reading: sensor-id, sensor-type, data (a string) or data-source
POST /subscribe    push readings to subscriber-uri (durable; idempotent)
POST /unsubscribe
"""

from __future__ import annotations

from typing import Protocol

from flask import Flask, Response

from server.http import ApiError, create_base_app, json_response, read_json_object, require_token
from server.sensor.source import SensorLoop
from server.validation import HTTP, Field, Schema, SigningSecret, Uri

SUBSCRIBE = Schema(
    Field("subscriber-uri", Uri(schemes=HTTP), required=True),
    Field("signing-secret", SigningSecret()),  # signed updates (Standard Webhooks)
)
TOPIC = "sensor"


class Subscriptions(Protocol):
    """The part of the durable outbox the API needs (server.outbox.Outbox has it)."""

    def subscribe(self, topic: str, uri: str, signing_secret: str | None = None) -> bool: ...

    def unsubscribe(self, topic: str, uri: str) -> bool: ...


def create_app(
    loop: SensorLoop, subscriptions: Subscriptions, *, token: str | None = None
) -> Flask:
    app = create_base_app("pdn.sensor", openapi="sensor")
    require_token(app, lambda: token, service="sensor")

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
