"""The ``peer`` fixture (a pytest plugin): a page server on 127.0.0.1 that answers ``{}`` to
anything and records what it is sent, standing in for webhook subscribers and for displays
(``peer.route("POST", "/schedule", 202, ...)``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pages import PageServer, json_reply


def json_peer(host: str = "127.0.0.1") -> PageServer:
    """A page server on ``host`` (another loopback address: another machine) that answers
    every request ``{}`` unless a route says otherwise."""
    return PageServer(host, default=json_reply({}))


@pytest.fixture
def peer() -> Iterator[PageServer]:
    server = json_peer()
    yield server
    server.close()
