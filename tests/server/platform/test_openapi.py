"""Each segment's OpenAPI 3.1 document agrees with the running app: same routes, and every
response of the running server (success and error) validates against its documented schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests

from server.content.app import DisplayForwarder
from server.platform.displaycreds import DisplayCredentials
from server.platform.validation import PATTERNS
from server.platform.wsgi import WsgiServer
from server.scheduler.service import SchedulerService
from tests.support.content import content_app
from tests.support.openapi import Document, app_operations
from tests.support.pages import PageServer
from tests.support.scheduler import lobby_folder
from tests.support.scheduler import start as start_scheduler
from tests.support.sensor import light_sensor
from tests.support.waiting import wait_until


def post_as(url: str, data: bytes, content_type: str) -> requests.Response:
    """POST ``data`` as ``content_type`` (what a schema's JSON body is not)."""
    return requests.post(url, data=data, timeout=5, headers={"Content-Type": content_type})


@pytest.mark.parametrize("name", ["scheduler", "content", "sensor"])
def test_documents_are_openapi_3_1(name: str) -> None:
    document = Document(name)
    assert document.data["openapi"].startswith("3.1")
    for schema in document.data["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    service = start_scheduler(tmp_path, lobby_folder(tmp_path))
    yield service
    service.stop()


def test_scheduler_document(scheduler: SchedulerService, peer: PageServer) -> None:
    document = Document("scheduler")
    assert app_operations(scheduler.app) == document.operations()
    base = scheduler.url
    peer.route("GET", "/", body={"location": {}, "sensors": {"url": "sensing"}, "name": "L"})
    peer.route("GET", "/sensing", body=[{"sensor-id": "s", "sensor-type": "light"}])
    location = {"latitude": "N54.0104", "longitude": "W 2 47.298"}
    check = document.check
    check(
        requests.post(f"{base}/displays", json={"url": peer.url, "location": location}, timeout=5),
        "/displays",
    )
    check(requests.post(f"{base}/displays", json={"url": "x"}, timeout=5), "/displays")
    check(
        post_as(f"{base}/displays", b"<a/>", "text/xml"),
        "/displays",
    )
    check(requests.get(f"{base}/displays", timeout=5), "/displays")
    check(requests.get(f"{base}/displays?url-only=nope", timeout=5), "/displays")
    wait_until(
        lambda: requests.get(f"{base}/displays?url-only=false", timeout=5).json()[0]["sensors"]
    )
    check(requests.get(f"{base}/displays?url-only=false", timeout=5), "/displays")
    ok = requests.get(f"{base}/schedule/lobby/", timeout=5)
    check(ok, "/schedule/{id}/")
    check(
        requests.get(
            f"{base}/schedule/lobby/", timeout=5, headers={"If-None-Match": ok.headers["ETag"]}
        ),
        "/schedule/{id}/",
    )
    check(requests.get(f"{base}/schedule/none/", timeout=5), "/schedule/{id}/")
    hook = {"subscriber-uri": "http://127.0.0.1:9/hook"}
    for action in ("subscribe", "unsubscribe"):
        path = f"/schedule/{{id}}/{action}/"
        check(requests.post(f"{base}/schedule/lobby/{action}/", json=hook, timeout=5), path)
        check(requests.post(f"{base}/schedule/lobby/{action}/", json={}, timeout=5), path)
        check(
            post_as(f"{base}/schedule/lobby/{action}/", b"x", "text/plain"),
            path,
        )
    check(
        requests.post(f"{base}/schedule/lobby/unsubscribe/", json=hook, timeout=5),
        "/schedule/{id}/unsubscribe/",
    )
    check(
        requests.post(f"{base}/schedule/none/subscribe/", json=hook, timeout=5),
        "/schedule/{id}/subscribe/",
    )
    check(requests.get(f"{base}/x/schedules", timeout=5), "/x/schedules")
    served = requests.get(f"{base}/x/openapi.json", timeout=5)
    check(served, "/x/openapi.json")
    assert served.json() == document.data


def test_content_document(tmp_path: Path, peer: PageServer) -> None:
    document = Document("content")
    credentials = DisplayCredentials(tmp_path / "none.toml", listed=[peer.url])
    forwarder = DisplayForwarder(timeout=1.0, credentials=credentials)
    app = content_app(forwarder, credentials)
    assert app_operations(app) == document.operations()
    server = WsgiServer(app, "127.0.0.1", 0).start()
    try:
        base = server.url
        check = document.check
        body: dict[str, Any] = {
            "application-params": {"text": "hi"},
            "display-uri": peer.url,
            "requestor": {"user-id": "u"},
        }
        peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
        check(requests.post(f"{base}/message/schedule", json=body, timeout=5), "/{name}/schedule")
        check(requests.post(f"{base}/schedule", json=body, timeout=5), "/schedule")
        peer.route("POST", "/schedule", 202, {"request-status": "rejected", "reason": "full"})
        check(requests.post(f"{base}/message/schedule", json=body, timeout=5), "/{name}/schedule")
        peer.route("POST", "/schedule", 500, {"error": "internal-error", "message": "x"})
        check(requests.post(f"{base}/message/schedule", json=body, timeout=5), "/{name}/schedule")
        peer.route("POST", "/schedule", 202, {}, delay=3)
        check(requests.post(f"{base}/message/schedule", json=body, timeout=5), "/{name}/schedule")
        check(requests.post(f"{base}/message/schedule", json={}, timeout=5), "/{name}/schedule")
        for stranger in ("http://127.0.0.9:9", f"{peer.url}/x/pair?"):
            unknown = {**body, "display-uri": stranger}
            check(
                requests.post(f"{base}/message/schedule", json=unknown, timeout=5),
                "/{name}/schedule",
            )
        check(requests.post(f"{base}/nothing/schedule", json=body, timeout=5), "/{name}/schedule")
        check(
            post_as(f"{base}/message/schedule", b"<a/>", "text/xml"),
            "/{name}/schedule",
        )
        check(requests.get(f"{base}/message/", timeout=5), "/{name}/")
        check(requests.get(f"{base}/message", timeout=5, allow_redirects=False), "/{name}/")
        check(requests.get(f"{base}/nothing/", timeout=5), "/{name}/")
        check(requests.get(f"{base}/message/index.html", timeout=5), "/{name}/{asset}")
        check(requests.get(f"{base}/message/none.css", timeout=5), "/{name}/{asset}")
        check(requests.get(f"{base}/x/apps", timeout=5), "/x/apps")
        check(requests.get(f"{base}/x/openapi.json", timeout=5), "/x/openapi.json")
    finally:
        server.stop()
        forwarder.close()


def test_sensor_document(tmp_path: Path, peer: PageServer) -> None:
    document = Document("sensor")
    service = light_sensor(tmp_path, interval=60.0)
    try:
        assert app_operations(service.app) == document.operations()
        base = service.url
        check = document.check
        check(requests.get(f"{base}/", timeout=5), "/")
        check(requests.get(f"{base}/x/openapi.json", timeout=5), "/x/openapi.json")
        hook = {"subscriber-uri": f"{peer.url}/sensing"}
        for path in ("/subscribe", "/unsubscribe"):
            check(requests.post(f"{base}{path}", json=hook, timeout=5), path)
            check(requests.post(f"{base}{path}", json={"subscriber-uri": "x"}, timeout=5), path)
            check(
                post_as(f"{base}{path}", b"<a/>", "text/xml"),
                path,
            )
        check(requests.post(f"{base}/unsubscribe", json=hook, timeout=5), "/unsubscribe")
        # Pushed updates match the documented SensorUpdate schema.
        update = peer.wait_for(1, "/sensing")[0].json()
        jsonschema.Draft202012Validator(
            {"$ref": "urn:pdn:sensor#/components/schemas/SensorUpdate"},
            registry=document.registry,
        ).validate(update)
        (tmp_path / "lux").unlink()
    finally:
        service.stop()


@pytest.mark.parametrize("name", ["display", "scheduler", "content", "sensor"])
def test_documents_carry_the_validations_grammars(name: str) -> None:
    """Each pattern in a document is one of server.platform.validation's, and each named grammar
    schema
    (HttpUri, Duration, Latitude...) carries the very pattern the validator uses."""
    data = Document(name).data
    schemas = data["components"]["schemas"]
    for grammar, pattern in PATTERNS.items():
        if grammar not in schemas:
            continue
        schema = schemas[grammar]
        found = [schema.get("pattern")] + [b.get("pattern") for b in schema.get("anyOf", [])]
        assert pattern in found, f"{name}: components/schemas/{grammar} is not the validator's"

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    requests_only = {k: v for k, v in data.items() if k in ("paths", "components")}
    allowed = {*PATTERNS.values(), *_PATH_PATTERNS}
    for pattern in walk(requests_only):
        assert pattern in allowed, (
            f"{name}: pattern {pattern!r} is not server.platform.validation's"
        )


#: Patterns of path parameters and response fields that no request body validator reads.
_PATH_PATTERNS = {
    "^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$",  # a schedule id (server.scheduler.schedules)
    "^[a-z0-9]+(-[a-z0-9]+)*$",  # error codes, in responses
    "^[0-9]+$",  # Last-Event-ID of the display's event stream (server/display/api.py)
    "^sha256:[0-9a-f]{64}$",  # a TLS fingerprint, in the display's pairing answer
}
