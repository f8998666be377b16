"""The outbox's HTTP client (httpx): kept-alive connections and proxies from the environment.
Delivery semantics are tested in tests/server/platform/test_webhooks.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.platform.outbox import Outbox
from tests.support.pages import PageServer, Reply
from tests.support.waiting import wait_until


@pytest.fixture
def recorder() -> Iterator[PageServer]:
    """An HTTP/1.1 server (keeps connections open) that answers 204 and records what it is
    sent."""
    with PageServer(default=Reply(204), keep_alive=True) as made:
        yield made


def test_events_to_one_subscriber_share_a_kept_alive_connection(
    tmp_path: Path, recorder: PageServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    box = Outbox(tmp_path / "o.db", name="test")
    box.start()
    try:
        box.subscribe("t", f"{recorder.url}/hook")
        for n in range(3):
            box.publish("t", str(n).encode(), "text/plain")
        seen = recorder.wait_for(3, "/hook")
    finally:
        box.stop()
    assert [r.body for r in seen] == [b"0", b"1", b"2"]
    assert len({r.client for r in seen}) == 1  # one connection for the three
    assert {r.headers["User-Agent"] for r in seen} == {"pdn-outbox"}


def test_proxy_from_the_environment_is_used(
    tmp_path: Path, peer: PageServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", peer.url)
    box = Outbox(tmp_path / "o.db", name="test")
    box.start()
    try:
        # Only the proxy can reach this name (.invalid never resolves).
        box.subscribe("t", "http://subscriber.invalid/hook")
        box.publish("t", b"via proxy", "text/plain")
        wait_until(lambda: box.stats()["pending-events"] == 0)
    finally:
        box.stop()
    (request,) = peer.received()
    assert request.path == "http://subscriber.invalid/hook"  # absolute form: sent to a proxy
    assert request.headers["Host"] == "subscriber.invalid"
    assert request.body == b"via proxy"
