"""The OpenAPI document and the running app agree: same routes, responses match the schemas."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
import pytest
import requests
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from server.display import create_app
from tests.support.inprocess_display import Display, cds

DOCUMENT: dict[str, Any] = json.loads(
    resources.files("server").joinpath("openapi/display.json").read_text()
)
REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:pdn:display", Resource.from_contents(DOCUMENT, default_specification=DRAFT202012)
)


def operations_in_document() -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for path, item in DOCUMENT["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }


def operations_in_app() -> set[tuple[str, str]]:
    app = create_app(type("Placeholder", (), {"config": None})())
    found = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):
                found.add((path, method))
    return found


def test_every_route_is_documented_and_vice_versa() -> None:
    assert operations_in_app() == operations_in_document()


def test_document_is_openapi_3_1() -> None:
    assert DOCUMENT["openapi"].startswith("3.1")
    for schema in DOCUMENT["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


def escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def response_pointer(path: str, method: str, status: int, media: str) -> str | None:
    """JSON pointer to the documented schema of this response (None: no body documented)."""
    pointer = f"/paths/{escape(path)}/{method.lower()}/responses/{status}"
    response = DOCUMENT["paths"][path][method.lower()]["responses"].get(str(status))
    assert response is not None, f"{method} {path} answered {status}, which is not documented"
    if "$ref" in response:
        pointer = response["$ref"][1:]
        response = DOCUMENT["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    content = response.get("content")
    if content is None:
        return None
    assert media in content, (
        f"{method} {path} {status} answered {media}, documented {list(content)}"
    )
    return f"{pointer}/content/{escape(media)}/schema"


def check(response: requests.Response, path: str) -> None:
    method = response.request.method or "GET"
    media = response.headers.get("Content-Type", "").split(";")[0]
    pointer = response_pointer(path, method, response.status_code, media)
    if pointer is None or media != "application/json":
        return
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"urn:pdn:display#{pointer}"}, registry=REGISTRY
    )
    validator.validate(response.json())


def test_responses_match_the_schemas(display: Display) -> None:
    check(display.get("/"), "/")
    check(display.get("/playback/"), "/playback/")
    check(display.post("/schedule", json={"content-item": "http://example.org/a"}), "/schedule")
    check(display.post("/schedule", json={}), "/schedule")
    check(display.post("/schedule", data=b"x", headers={"Content-Type": "text/plain"}), "/schedule")
    check(
        display.post(
            "/schedule",
            data=cds("lobby", "http://example.org/b"),
            headers={"Content-Type": "text/xml"},
        ),
        "/schedule",
    )
    check(
        display.post(
            "/schedule", data=b"<content-set><bad/>", headers={"Content-Type": "text/xml"}
        ),
        "/schedule",
    )
    display.wait_playback(lambda r: r["origin"] == "request")
    check(display.get("/playback/"), "/playback/")
    check(
        display.post("/sensing", json={"sensor-id": "t", "sensor-type": "x", "data": 1}), "/sensing"
    )
    check(display.post("/sensing", json={"sensor-id": "u", "data": 1}), "/sensing")
    check(display.get("/sensing"), "/sensing")
    hook = {"subscriber-uri": "http://127.0.0.1:9/hook"}
    check(display.post("/playback/subscribe/", json=hook), "/playback/subscribe/")
    check(display.post("/playback/subscribe/", json={}), "/playback/subscribe/")
    check(display.post("/playback/unsubscribe/", json=hook), "/playback/unsubscribe/")
    check(display.post("/playback/unsubscribe/", json=hook), "/playback/unsubscribe/")
    check(display.get("/x/health"), "/x/health")
    check(display.get("/x/screenshot"), "/x/screenshot")
    openapi = display.get("/x/openapi.json")
    check(openapi, "/x/openapi.json")
    assert openapi.json() == DOCUMENT


@pytest.mark.parametrize(
    "token_response",
    [("/schedule", {"content-item": "http://example.org/"}), ("/sensing", {"sensor-id": "a"})],
)
def test_401_is_documented(make_display: Any, token_response: tuple[str, dict[str, Any]]) -> None:
    display = make_display(api_token="t")
    path, body = token_response
    check(display.post(path, json=body), path)


def test_webhook_payload_schema(display: Display) -> None:
    schema = DOCUMENT["webhooks"]["playbackUpdate"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]
    validator = jsonschema.Draft202012Validator(
        {"$ref": "urn:pdn:display" + schema["$ref"]}, registry=REGISTRY
    )
    validator.validate({**display.playback(), "display": display.url})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**display.playback(), "sequence": "one"})
