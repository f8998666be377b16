"""The OpenAPI 3.1 documents the segments ship (``server/openapi/<name>.json``), for tests that
check a running server against them: the operations a document lists, those a Flask app
routes, and each response's status, headers and body against what the document says.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
import requests
from flask import Flask
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


class Document:
    """One segment's document; ``check`` validates a response of its running server against
    it and remembers the (path, method, status) it checked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.data: dict[str, Any] = json.loads(
            resources.files("server").joinpath(f"openapi/{name}.json").read_text()
        )
        self.registry: Registry[Any] = Registry().with_resource(
            f"urn:pdn:{name}", Resource.from_contents(self.data, default_specification=DRAFT202012)
        )
        self.checked: set[tuple[str, str, int]] = set()

    def operations(self) -> set[tuple[str, str]]:
        return {
            (path, method.upper())
            for path, item in self.data["paths"].items()
            for method in item
            if method in ("get", "post", "put", "patch", "delete")
        }

    def check(self, response: requests.Response, path: str) -> None:
        method = (response.request.method or "GET").lower()
        status = response.status_code
        operation = self.data["paths"][path][method]
        documented = operation["responses"].get(str(status))
        assert documented is not None, f"{method} {path} answered {status}: not documented"
        pointer = f"/paths/{_escape(path)}/{method}/responses/{status}"
        if "$ref" in documented:
            pointer = documented["$ref"][1:]
            documented = self.data["components"]["responses"][documented["$ref"].rsplit("/", 1)[1]]
        self.checked.add((path, method, status))
        for header, spec in documented.get("headers", {}).items():
            assert not spec.get("required") or header in response.headers, (
                f"{method} {path} {status}: no {header} header"
            )
        content = documented.get("content")
        if content is None:
            return
        media = response.headers.get("Content-Type", "").split(";")[0]
        key = media if media in content else "*/*"
        assert key in content, f"{method} {path} {status}: {media}, documented {list(content)}"
        if media != "application/json":
            return
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"urn:pdn:{self.name}#{pointer}/content/{_escape(key)}/schema"},
            registry=self.registry,
        )
        validator.validate(response.json())


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def app_operations(app: Flask) -> set[tuple[str, str]]:
    """The (path, METHOD) pairs ``app`` routes, paths written as the document writes them."""
    found = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):
                found.add((path, method))
    return found
