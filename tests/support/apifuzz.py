"""Schemathesis over a segment's OpenAPI document and its live app (a real server on loopback).

Every generated request is checked: no 5xx, the status documented, the response matching its
schema and media type, every request the document calls valid accepted (not 400/415: only
the documented outcomes that are not about the request's shape, such as 404 not-subscribed),
and every request it calls invalid refused with 4xx. Seeded and derandomized, so a run is the
same run every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import schemathesis
from schemathesis.engine import events, from_schema

SEED = 20261122
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
    "negative_data_rejection",
)
#: A valid request may still meet a missing resource (an unknown schedule or application, a
#: URI that is not subscribed) or an unchanged one (304): never 400, 413 or 415.
POSITIVE_STATUSES = ["2xx", "304", "404"]
#: An invalid request is refused: 400 (415 for a body that is not JSON), or it names no
#: resource (404) or method (405) here.
NEGATIVE_STATUSES = ["400", "404", "405", "415"]


@dataclass
class Finding:
    operation: str
    check: str
    title: str
    message: str
    request: str

    def __str__(self) -> str:
        return f"{self.operation} [{self.check}] {self.title}: {self.message}\n    {self.request}"


@dataclass
class FuzzResult:
    cases: int = 0
    by_phase: dict[str, int] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def document(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files("server").joinpath(f"openapi/{name}.json").read_text()
    )
    return data


def run(
    name: str,
    base_url: str,
    *,
    max_examples: int,
    exclude_paths: tuple[str, ...] = (),
    allow: Callable[[Finding, dict[str, Any]], bool] = lambda finding, response: False,
) -> FuzzResult:
    """Run schemathesis (examples, coverage and fuzzing phases) against ``base_url``.

    ``allow`` may excuse a finding the document states in words but JSON Schema cannot say
    (``response`` is the JSON answer). Streams must be in ``exclude_paths``.
    """
    checks: dict[str, Any] = {"enabled": False}
    for check in CHECKS:
        checks[check] = {"enabled": True}
    checks["positive_data_acceptance"]["expected-statuses"] = POSITIVE_STATUSES
    checks["negative_data_rejection"]["expected-statuses"] = NEGATIVE_STATUSES
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            "generation": {
                "deterministic": True,
                "max-examples": max_examples,
                "mode": "all",
                "database": "none",
            },
            "phases": {"stateful": {"enabled": False}},
            "checks": checks,
            "request-timeout": 10,
        }
    )
    schema: schemathesis.BaseSchema = schemathesis.openapi.from_dict(document(name), config=config)
    for path in exclude_paths:
        schema = schema.exclude(path=path)
    result = FuzzResult()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _record(event, result, allow)
        elif isinstance(event, events.NonFatalError | events.FatalError):
            result.errors.append(
                f"{getattr(event, 'label', '')}: {event.info.format()}"
                if isinstance(event, events.NonFatalError)
                else repr(event.exception)
            )
    return result


def _record(
    event: events.ScenarioFinished,
    result: FuzzResult,
    allow: Callable[[Finding, dict[str, Any]], bool],
) -> None:
    recorder = event.recorder
    result.cases += len(recorder.cases)
    phase = str(event.phase.value)
    result.by_phase[phase] = result.by_phase.get(phase, 0) + len(recorder.cases)
    for interaction in recorder.interactions.values():
        if interaction.response is not None:
            status = interaction.response.status_code
            result.statuses[status] = result.statuses.get(status, 0) + 1
    for case_id, nodes in recorder.checks.items():
        for node in nodes:
            if node.failure_info is None:
                continue
            failure = node.failure_info.failure
            found = recorder.interactions.get(case_id)
            request = ""
            answer: dict[str, Any] = {}
            if (sent := found) is not None:
                body = sent.request.body or b""
                request = f"{sent.request.method} {sent.request.uri} {body[:400]!r}"
                if sent.response is not None:
                    request += f" -> {sent.response.status_code} {sent.response.content[:300]!r}"
                    try:
                        answer = json.loads(sent.response.content or b"null") or {}
                    except ValueError:
                        answer = {}
            finding = Finding(recorder.label, node.name, failure.title, failure.message, request)
            if not allow(finding, answer if isinstance(answer, dict) else {}):
                result.findings.append(finding)


def assert_agrees(result: FuzzResult) -> None:
    report = "\n".join(str(finding) for finding in result.findings[:20])
    assert not result.errors, "\n".join(result.errors)
    assert not result.findings, f"{len(result.findings)} findings:\n{report}"
