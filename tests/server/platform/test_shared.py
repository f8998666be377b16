"""What the three segments share (server/platform/standalone.py, server/platform/http.py), segment
by segment."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from server.cli import build_parser, main
from server.content.app import DisplayForwarder
from server.platform.exitcodes import EPILOG, EXIT_START_FAILED
from server.platform.net import local_address, url_host
from server.sensor.source import FileSource
from tests.support.content import content_app as make_content_app
from tests.support.scheduler import start as start_scheduler
from tests.support.sensor import start as start_sensor

SEGMENTS = ("scheduler", "content", "sensor")


def scheduler_app(tmp_path: Path) -> Iterator[Flask]:
    (tmp_path / "schedules").mkdir()
    service = start_scheduler(tmp_path, tmp_path / "schedules", token="s3cret")
    yield service.app
    service.stop()


def content_app(tmp_path: Path) -> Iterator[Flask]:
    forwarder = DisplayForwarder(timeout=1.0)
    yield make_content_app(forwarder, tmp_path / "no-displays.toml", token="s3cret")
    forwarder.close()


def sensor_app(tmp_path: Path) -> Iterator[Flask]:
    (tmp_path / "lux").write_text("300")
    service = start_sensor(tmp_path / "sensor-data", FileSource(tmp_path / "lux"), token="s3cret")
    yield service.app
    service.stop()


#: A state-changing path the token guards, and the refusal. (POST /displays and the content
#: segment's POST /schedule are open by design: docs/interface.md, "Who may change what".)
APPS: dict[str, tuple[Callable[[Path], Iterator[Flask]], str, str]] = {
    "scheduler": (
        scheduler_app,
        "/x/assignments",
        "This scheduler needs its operator token as 'Authorization: Bearer <token>' for changes.",
    ),
    "content": (
        content_app,
        "/x/apps",
        "This content server needs 'Authorization: Bearer <token>' for changes.",
    ),
    "sensor": (
        sensor_app,
        "/subscribe",
        "This sensor needs 'Authorization: Bearer <token>' for changes.",
    ),
}


@pytest.mark.parametrize("segment", SEGMENTS)
def test_token_refusal_names_the_segment(segment: str, tmp_path: Path) -> None:
    make, path, message = APPS[segment]
    apps = make(tmp_path)
    app = next(apps)
    try:
        refused = app.test_client().post(path, json={})
        assert refused.status_code == 401
        assert refused.headers["Content-Type"] == "application/json"
        assert refused.json == {"error": "unauthorized", "message": message}
    finally:
        next(apps, None)


@pytest.mark.parametrize("segment", SEGMENTS)
def test_openapi_document_is_served_once(segment: str, tmp_path: Path) -> None:
    make = APPS[segment][0]
    apps = make(tmp_path)
    app = next(apps)
    try:
        rules = [rule for rule in app.url_map.iter_rules() if rule.rule == "/x/openapi.json"]
        assert len(rules) == 1
        served = app.test_client().get("/x/openapi.json")
        assert served.status_code == 200
        assert served.json is not None
        assert served.json["openapi"].startswith("3.1")
    finally:
        next(apps, None)


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError(f"no subcommand {name}")


@pytest.mark.parametrize("segment", SEGMENTS)
def test_every_segment_documents_the_exit_codes(segment: str) -> None:
    parser = subcommand(segment)
    assert parser.epilog == EPILOG
    assert "1 could not start" in parser.format_help()
    options = {option for action in parser._actions for option in action.option_strings}
    assert {"--host", "--port"} <= options


def test_an_unusable_data_dir_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "schedules").mkdir()
    not_a_directory = tmp_path / "data"
    not_a_directory.write_text("a file")
    code = main(
        [
            "scheduler",
            "--port",
            "0",
            "--schedules",
            str(tmp_path / "schedules"),
            "--data-dir",
            str(not_a_directory),
        ]
    )
    assert code == EXIT_START_FAILED == 1
    logged = capsys.readouterr().err
    assert f"pdn.scheduler: cannot start on 127.0.0.1:0 with data in {not_a_directory}: " in logged


def test_local_address() -> None:
    assert local_address("127.0.0.1") == "127.0.0.1"
    assert local_address()  # an address on the default route, else the host name
    assert url_host("::1") == "[::1]"
    assert url_host("[::1]") == "[::1]"
    assert url_host("192.0.2.7") == "192.0.2.7"
