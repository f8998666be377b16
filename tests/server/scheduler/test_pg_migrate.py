"""Moving an existing registry from SQLite to PostgreSQL: ``pdn scheduler --migrate-to URL``
copies displays, schedules, groups, assignments, proof of play and the outbox's subscriptions,
and a scheduler started on the database carries on where the SQLite one stopped."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from server.cli import main
from server.platform.exitcodes import EXIT_USAGE
from server.scheduler.storage import PlayRecord
from tests.support.fleet import assign, put_schedule
from tests.support.inprocess_display import cds
from tests.support.pages import PageServer
from tests.support.scheduler import start

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


def test_migrate_to_copies_the_registry(
    tmp_path: Path, postgres_url: str, peer: PageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PDN_DATABASE_URL", raising=False)
    data = tmp_path / "data"
    old = start(tmp_path, None)  # its data in ``data``
    try:
        base = old.url
        for n in range(3):
            answer = requests.post(
                f"{base}/displays",
                json={"url": f"http://192.0.2.{n + 1}:8080", "location": LOCATION},
                timeout=5,
            )
            assert answer.status_code == 201
        assert put_schedule(base, "hall", cds("hall", "http://127.0.0.1:9/a.html")).ok
        assert requests.post(
            f"{base}/x/groups/lobby/displays", json={"display": "http://192.0.2.2:8080"}, timeout=5
        ).ok
        assert assign(base, "hall", group="lobby").ok
        assert requests.post(
            f"{base}/schedule/hall/subscribe/",
            json={"subscriber-uri": f"{peer.url}/hook"},
            timeout=5,
        ).ok
        played = PlayRecord(
            display="http://192.0.2.1:8080",
            sequence=1,
            item="http://127.0.0.1:9/a.html",
            content_type="text/html",
            set_name="hall",
            origin="schedule",
            started="2026-11-23T10:00:00Z",
            started_at=1795428000.0,
            duration=10.0,
            ended=None,
            painted=True,
            received=time.time(),
        )
        old.storage.record_play(played)
        # And a play of another zone of the screen, under a layout: copied with both.
        ticker = replace(played, sequence=2, item="http://127.0.0.1:9/news.rss", zone="ticker")
        old.storage.record_play(replace(ticker, layout="lobby", set_name="news"))
        before = {
            path: requests.get(f"{base}{path}", timeout=5).json()
            for path in ("/displays", "/x/schedules", "/x/groups", "/x/assignments", "/x/plays")
        }
        assert all(before.values()), before  # something of each kind to copy
        secret = old.storage.ingest_secret("http://192.0.2.3:8080")
    finally:
        old.stop()

    code = main(["scheduler", "--data-dir", str(data), "--migrate-to", postgres_url])
    assert code == 0
    # A second copy onto the same database is refused, not merged.
    assert main(["scheduler", "--data-dir", str(data), "--migrate-to", postgres_url]) == EXIT_USAGE
    assert (
        main(["scheduler", "--data-dir", str(tmp_path / "none"), "--migrate-to", postgres_url])
        == EXIT_USAGE
    )

    new = start(tmp_path / "other", None, database=postgres_url)
    try:
        for path, listed in before.items():
            now = requests.get(f"{new.url}{path}", timeout=5).json()
            if path == "/x/schedules":  # the URLs name the new scheduler
                assert [{**s, "url": None} for s in now] == [{**s, "url": None} for s in listed]
            else:
                assert now == listed, path
        zones = requests.get(f"{new.url}/x/plays", timeout=5).json()["plays"]
        assert [(p["zone"], p["layout"]) for p in zones] == [("main", None), ("ticker", "lobby")]
        assert new.storage.ingest_secret("http://192.0.2.3:8080") == secret
        # How far each display's plays are accounted for came along.
        states = new.storage.backfill_states()
        assert sorted(states) == [f"http://192.0.2.{n}:8080" for n in (1, 2, 3)]
        assert states["http://192.0.2.1:8080"].seen == 2
        assert new.outbox.subscribers("schedule:hall") == [f"{peer.url}/hook"]
        # The subscription works: a change made on PostgreSQL reaches the old subscriber.
        assert put_schedule(new.url, "hall", cds("hall", "http://127.0.0.1:9/b.html")).ok
        assert b"b.html" in peer.wait_for(1, "/hook")[0].body
    finally:
        new.stop()
