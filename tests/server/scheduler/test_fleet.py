"""Running a fleet from the scheduler: real scheduler, real displays, on loopback.

Each display is the real Display Segment in-process (``tests/support/fleet.py``: the real
engine, store, outbox and API on waitress, with a renderer that paints at once) on a server of
its own, registered by the real ``ScheduleFollower`` exactly as ``pdn display --scheduler URL``
does it; the scheduler and the displays are fixtures of ``conftest.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.fleet import LOCATION, Screen, assign, plays, put_schedule, unassign
from tests.support.inprocess_display import cds
from tests.support.signed import signed_post
from tests.support.waiting import wait_until

# The whole suite on both storage backends: SQLite and PostgreSQL.
pytestmark = pytest.mark.usefixtures("scheduler_backend")


def timed_until(predicate: Callable[[], Any], timeout: float = 10.0) -> float:
    """Seconds until ``predicate()`` holds (AssertionError after ``timeout``)."""
    started = time.monotonic()
    wait_until(predicate, timeout=timeout, step=0.01)
    return time.monotonic() - started


# -- schedules written through the API ---------------------------------------------------------


def test_put_validates_serves_and_delete_removes(scheduler: SchedulerService) -> None:
    base = scheduler.url
    lobby = cds("lobby", "http://127.0.0.1:9/one.html")
    created = put_schedule(base, "lobby", lobby)
    assert created.status_code == 201
    served = requests.get(f"{base}/schedule/lobby/", timeout=5)
    assert served.status_code == 200 and served.content == lobby
    assert served.headers["Content-Type"].startswith("text/xml")
    folder = scheduler.library.directory
    assert folder is not None
    assert (folder / "lobby.xml").read_bytes() == lobby  # the folder too
    replaced = put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/two.html"))
    assert replaced.status_code == 204
    assert b"two.html" in requests.get(f"{base}/schedule/lobby/", timeout=5).content

    broken = b'<content-set name="lobby">\n  <content-item>\n</content-set>\n'
    refused = put_schedule(base, "lobby", broken)
    assert refused.status_code == 400
    body = refused.json()
    assert body["error"] == "invalid-cds"
    assert body["line"] == 3 and "line 3" in body["message"]
    assert b"two.html" in requests.get(f"{base}/schedule/lobby/", timeout=5).content  # unchanged

    assert put_schedule(base, ".hidden", lobby).status_code == 400
    not_xml = requests.put(f"{base}/x/schedules/x", json={"a": 1}, timeout=5)
    assert not_xml.status_code == 415

    assert requests.delete(f"{base}/x/schedules/lobby", timeout=5).status_code == 204
    assert requests.get(f"{base}/schedule/lobby/", timeout=5).status_code == 404
    assert not (folder / "lobby.xml").exists()
    assert requests.delete(f"{base}/x/schedules/lobby", timeout=5).status_code == 404


def test_put_needs_the_token(locked_scheduler: SchedulerService) -> None:
    service = locked_scheduler
    lobby = cds("lobby", "http://127.0.0.1:9/one.html")
    assert put_schedule(service.url, "lobby", lobby).status_code == 401
    assert put_schedule(service.url, "lobby", lobby, token="t0k").status_code == 201


# -- assignment ---------------------------------------------------------------------------------


def test_assignment_to_display_and_group_reaches_the_screens(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby.html"))
    put_schedule(base, "menu", cds("menu", "http://127.0.0.1:9/menu.html"))
    hall = make_screen("hall", groups=["hall"])
    desk = make_screen("desk")
    # The group the display declared itself in, from its config.
    assert requests.get(f"{base}/x/groups", timeout=5).json() == [
        {"name": "hall", "displays": [hall.url]}
    ]

    answer = assign(base, "lobby", group="hall")
    assert answer.status_code == 201
    latency = timed_until(lambda: hall.item() == "http://127.0.0.1:9/lobby.html")
    assert latency < 2.0, latency
    assert desk.item() is None  # not in the group

    # pdn ctl group: an operator puts the desk in the group too.
    joined = requests.post(f"{base}/x/groups/hall/displays", json={"display": desk.url}, timeout=5)
    assert joined.status_code == 201
    assert timed_until(lambda: desk.item() == "http://127.0.0.1:9/lobby.html") < 2.0

    # A direct assignment on top of the group's: the union, and priorities decide.
    urgent = cds("urgent", "http://127.0.0.1:9/urgent.html", priority="high")
    put_schedule(base, "urgent", urgent)
    assert assign(base, "urgent", display=desk.url).status_code == 201
    assert assign(base, "urgent", display=desk.url).status_code == 200  # existed
    assert timed_until(lambda: desk.item() == "http://127.0.0.1:9/urgent.html") < 2.0
    assert set(desk.display.service.document_names()) == {"lobby", "urgent"}
    assert hall.item() == "http://127.0.0.1:9/lobby.html"
    listing = requests.get(f"{base}/x/assignments", timeout=5).json()
    assert {"schedule": "urgent", "display": desk.url} in listing
    assert {"schedule": "lobby", "group": "hall"} in listing
    mine = requests.get(f"{base}/x/displays/schedules", params={"display": desk.url}, timeout=5)
    assert mine.json()["schedules"] == ["lobby", "urgent"]

    # Editing a schedule reaches every display it is assigned to.
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby-v2.html"))
    assert timed_until(lambda: hall.item() == "http://127.0.0.1:9/lobby-v2.html") < 2.0

    # Unassigning removes the set from the screen; the group's schedule plays again.
    assert unassign(base, "urgent", display=desk.url).status_code == 200
    assert timed_until(lambda: desk.item() == "http://127.0.0.1:9/lobby-v2.html") < 2.0
    assert desk.display.service.document_names() == ["lobby"]
    assert unassign(base, "urgent", display=desk.url).status_code == 404

    # Out of the group: nothing assigned any more.
    left = requests.delete(f"{base}/x/groups/hall/displays", json={"display": desk.url}, timeout=5)
    assert left.status_code == 200
    wait_until(lambda: desk.display.service.document_names() == [])
    # Deleting a schedule takes it off the screens it was assigned to.
    assert requests.delete(f"{base}/x/schedules/lobby", timeout=5).status_code == 204
    wait_until(lambda: hall.display.service.document_names() == [])


def test_assignment_errors(scheduler: SchedulerService, make_screen: Callable[..., Screen]) -> None:
    base = scheduler.url
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby.html"))
    screen = make_screen("one")
    assert assign(base, "nope", group="hall").status_code == 404
    unknown = assign(base, "lobby", display="http://192.0.2.7:8080")
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown-display"
    both = assign(base, "lobby", display=screen.url, group="hall")
    assert both.status_code == 400
    assert assign(base, "lobby").status_code == 400
    assert assign(base, "lobby", group="bad name").status_code == 400
    assert requests.post(f"{base}/x/assignments", json={}, timeout=5).status_code == 400


def test_display_offline_while_assigned_catches_up_when_back(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby.html"))
    put_schedule(base, "menu", cds("menu", "http://127.0.0.1:9/menu.html"))
    screen = make_screen("away", groups=["hall"])
    assign(base, "lobby", group="hall")
    wait_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html")

    screen.go_offline()
    # While it is away: lobby is unassigned and menu assigned. Both are tried and fail.
    assert unassign(base, "lobby", group="hall").status_code == 200
    assert assign(base, "menu", group="hall").status_code == 201
    time.sleep(2.5)  # long enough for the outbox to back off
    assert screen.item() == "http://127.0.0.1:9/lobby.html"  # it heard nothing

    screen.come_back()
    caught_up = timed_until(lambda: screen.item() == "http://127.0.0.1:9/menu.html", 10.0)
    assert screen.display.service.document_names() == ["menu"]
    assert caught_up < 3.0, caught_up


def test_restarted_display_is_pushed_everything_at_registration(
    scheduler: SchedulerService, make_screen: Callable[..., Screen]
) -> None:
    base = scheduler.url
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby.html"))
    screen = make_screen("fresh")
    assign(base, "lobby", display=screen.url)
    wait_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html")
    # The display lost its state (a new SD card): registering again brings everything back.
    screen.display.service.apply_cds(b'<content-set name="lobby" type="inline"/>')
    wait_until(lambda: screen.item() is None)
    screen.follower._registered_at = None
    screen.follower.sync_once()
    wait_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html", timeout=3)


def test_ctl_assign_unassign_and_group(
    scheduler: SchedulerService, lobby_screen: Screen, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli import main
    from server.ctl.cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE

    base, screen = scheduler.url, lobby_screen
    assert main(["ctl", "group", base, screen.url, "hall"]) == EXIT_OK
    assert f"{screen.url} is in the group hall" in capsys.readouterr().out
    assert main(["ctl", "assign", base, "--group", "hall", "lobby"]) == EXIT_OK
    assert "schedule lobby assigned to group hall" in capsys.readouterr().out
    assert timed_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html") < 2.0
    assert main(["ctl", "unassign", base, "--group", "hall", "lobby"]) == EXIT_OK
    wait_until(lambda: screen.item() is None)
    assert main(["ctl", "assign", base, "--display", screen.url, "lobby"]) == EXIT_OK
    assert timed_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html") < 2.0
    assert main(["ctl", "group", base, screen.url, "hall", "--remove"]) == EXIT_OK
    capsys.readouterr()
    assert main(["ctl", "assign", base, "--group", "hall", "nope"]) == EXIT_REFUSED
    assert "no schedule 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["ctl", "assign", base, "lobby"])  # neither --display nor --group
    assert exited.value.code == EXIT_USAGE


def test_display_config_scheduler_and_groups(tmp_path: Path) -> None:
    import argparse

    from player.cli import add_parser, load

    def build_parser_for_tests(argv: list[str]) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_parser(parser.add_subparsers())
        return parser.parse_args(["display", *argv])

    path = tmp_path / "pdn.toml"
    path.write_text(
        'scheduler = "http://10.0.0.9:8090"\ngroups = ["hall", "floor-2"]\n'
        '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n'
    )
    config = load(build_parser_for_tests(["--config", str(path)]))
    assert config.register_url == "http://10.0.0.9:8090"
    assert config.groups == ("floor-2", "hall")
    flagged = load(
        build_parser_for_tests(["--config", str(path), "--scheduler", "http://10.0.0.8:8090"])
    )
    assert flagged.register_url == "http://10.0.0.8:8090"


# -- proof of play ------------------------------------------------------------------------------


def test_proof_of_play_from_a_real_display(
    scheduler: SchedulerService, lobby_screen: Screen, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli import main
    from server.ctl.cli import EXIT_OK

    base, screen = scheduler.url, lobby_screen
    # The scheduler subscribed to the display's playback updates when it read it.
    wait_until(lambda: scheduler.storage.ingest_secret(screen.url) is not None)
    wait_until(lambda: screen.display.outbox.subscribers("playback"))
    assign(base, "lobby", display=screen.url)
    wait_until(lambda: screen.item() == "http://127.0.0.1:9/lobby.html")
    sequence = screen.display.service.playback()["sequence"]

    def stored() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = plays(base, display=screen.url)["plays"]
        return [p for p in found if p["sequence"] == sequence]

    record = wait_until(stored)[0]
    assert record["display"] == screen.url
    assert record["content-item"] == "http://127.0.0.1:9/lobby.html"
    assert record["set"] == "lobby"  # the schedule's id names the set on the display
    assert record["origin"] == "schedule"
    assert record["painted"] is True
    assert record["ended"] is None  # still on screen
    assert record["gap-before"] == 0

    # An ad-hoc request ends it; its own update follows in sequence.
    screen.display.post("/schedule", json={"content-item": "http://127.0.0.1:9/req.html"})
    wait_until(lambda: stored()[0]["ended"] is not None)
    everything = plays(base)
    assert [p["content-item"] for p in everything["plays"]][-2:] == [
        "http://127.0.0.1:9/lobby.html",
        "http://127.0.0.1:9/req.html",
    ]
    assert everything["gaps"] == []

    # A time range: nothing started before the epoch's first day, all of it since.
    assert plays(base, until="1970-01-02T00:00:00Z")["plays"] == []
    assert len(plays(base, since="2000-01-01T00:00:00+01:00")["plays"]) == len(everything["plays"])
    bad = requests.get(f"{base}/x/plays", params={"since": "yesterday"}, timeout=5)
    assert bad.status_code == 400 and bad.json()["field"] == "since"

    as_csv = requests.get(f"{base}/x/plays", headers={"Accept": "text/csv"}, timeout=5)
    assert as_csv.headers["Content-Type"].startswith("text/csv")
    lines = as_csv.text.splitlines()
    assert lines[0].startswith("display,sequence,started,ended,content_item")
    assert any("lobby.html,text/html,lobby,schedule" in line for line in lines[1:])

    assert main(["ctl", "plays", base, "--display", screen.url]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"#{sequence}" in out and "[lobby]  http://127.0.0.1:9/lobby.html" in out
    assert main(["ctl", "plays", base, "--csv", "--since", "2000-01-01"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("display,sequence")


def test_gaps_in_a_sequence_are_shown(
    scheduler: SchedulerService,
    make_screen: Callable[..., Screen],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from server.cli import main

    base = scheduler.url
    screen = make_screen("gappy")
    wait_until(lambda: scheduler.storage.ingest_secret(screen.url) is not None)
    ingest = scheduler._playback_subscriber(screen.url)
    assert ingest is not None and ingest.startswith(base + "/x/ingest/")
    update = {
        "content-item": "http://127.0.0.1:9/a.html",
        "content-type": "text/html",
        "origin": "schedule",
        "set": "s",
        "duration": 10.0,
        "display": "http://spoofed.example",  # not trusted: the secret names the display
    }
    secret = scheduler._playback_signing_secret(screen.url)
    assert secret is not None
    for sequence, second in ((100, 0), (101, 10), (105, 50)):
        body = {**update, "sequence": sequence, "started": f"2030-01-01T00:00:{second:02d}+00:00"}
        assert signed_post(ingest, body, secret).status_code == 200
    # A redelivery (the same event again, under another id) is stored once.
    assert signed_post(ingest, body, secret).status_code == 200
    # The jump makes the scheduler read the display's play log, which does not
    # have these made-up plays: the gap stays, saying so, once the log has been read.
    answer = wait_until(
        lambda: (
            (found := plays(base, display=screen.url, since="2030-01-01T00:00:00Z"))
            and found["gaps"]
            and not found["gaps"][0]["filling"]
            and found
        )
    )
    assert [p["sequence"] for p in answer["plays"]] == [100, 101, 105]
    assert [p["gap-before"] for p in answer["plays"]] == [0, 0, 3]
    assert answer["plays"][0]["ended"] == "2030-01-01T00:00:10+00:00"
    assert answer["plays"][1]["ended"] is None  # what followed it was never received
    assert answer["gaps"] == [
        {
            "display": screen.url,
            "after-sequence": 101,
            "before-sequence": 105,
            "missing": 3,
            "from": "2030-01-01T00:00:10+00:00",
            "until": "2030-01-01T00:00:50+00:00",
            "reason": "the display's play log does not have them",
            "filling": False,
        }
    ]
    main(["ctl", "plays", base, "--since", "2030-01-01T00:00:00Z"])
    out = capsys.readouterr().out
    assert "-- 3 update(s) of" in out and "the display's play log does not have them --" in out
    as_csv = requests.get(
        f"{base}/x/plays",
        params={"since": "2030-01-01T00:00:00Z"},
        headers={"Accept": "text/csv"},
        timeout=5,
    ).text.splitlines()
    assert as_csv[0].endswith(",gap_before,gap_reason")
    assert as_csv[-1].endswith(",3,the display's play log does not have them")
    assert signed_post(base + "/x/ingest/nope", body, secret).status_code == 404
    bad = signed_post(ingest, {**body, "sequence": "x"}, secret)
    assert bad.status_code == 400


def test_ingest_needs_no_token_but_plays_do_not_leak_it(locked_scheduler: SchedulerService) -> None:
    service = locked_scheduler
    auth = {"Authorization": "Bearer t0k"}
    display = "http://127.0.0.1:9"
    registered = requests.post(
        f"{service.url}/displays",
        json={"url": display, "location": LOCATION},
        headers=auth,
        timeout=5,
    )
    assert registered.status_code == 201
    ingest = service._playback_subscriber(display)
    secret = service._playback_signing_secret(display)
    assert ingest is not None and secret is not None
    update = {"sequence": 1, "origin": "idle", "started": "2030-01-01T00:00:00+00:00"}
    assert signed_post(ingest, update, secret).status_code == 200
    # Writes of the API itself still need the token.
    assert requests.post(f"{service.url}/x/assignments", json={}, timeout=5).status_code == 401
    assert plays(service.url)["plays"][0]["origin"] == "idle"


# -- broadcast ----------------------------------------------------------------------------------


def playing(screen: Screen, item: str) -> bool:
    return screen.item() == item


def test_broadcast_to_three_displays_one_down(
    scheduler: SchedulerService,
    make_screen: Callable[..., Screen],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from server.cli import main
    from server.ctl.cli import EXIT_REFUSED

    base = scheduler.url
    put_schedule(base, "lobby", cds("lobby", "http://127.0.0.1:9/lobby.html", priority="high"))
    screens = [make_screen(name, groups=["floor"]) for name in ("north", "south", "east")]
    assign(base, "lobby", group="floor")
    for screen in screens:
        wait_until(partial(playing, screen, "http://127.0.0.1:9/lobby.html"))
        wait_until(partial(screen.display.outbox.subscribers, "playback"))
    down = screens[2]
    down.go_offline()

    started = time.monotonic()
    code = main(
        [
            "ctl", "broadcast", base, "--group", "floor", "http://127.0.0.1:9/fire.html",
            "--for", "4 seconds", "--timeout", "2",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == EXIT_REFUSED, out
    assert time.monotonic() - started < 6
    for screen in screens[:2]:
        assert f"{screen.url}: shown after" in out
        assert screen.item() == "http://127.0.0.1:9/fire.html"
        # At the highest priority: an ad-hoc request (high) waits behind it.
        screen.display.post("/schedule", json={"content-item": "http://127.0.0.1:9/req.html"})
    assert f"{down.url}: NOT confirmed within 2 s" in out
    assert "1 of 3 screen(s) did not confirm" in out

    listing = requests.get(f"{base}/x/broadcasts", timeout=5).json()
    report = requests.get(f"{base}/x/broadcasts/{listing[-1]['id']}", timeout=5).json()
    statuses = {entry["display"]: entry["status"] for entry in report["displays"]}
    assert statuses == {
        screens[0].url: "confirmed",
        screens[1].url: "confirmed",
        down.url: "not-confirmed",
    }
    time.sleep(0.3)
    assert screens[0].item() == "http://127.0.0.1:9/fire.html"  # the request waits
    # Proof of play names it too, in the broadcast's own set.
    fire = [p for p in plays(base)["plays"] if p["content-item"] == "http://127.0.0.1:9/fire.html"]
    assert {p["set"] for p in fire} == {f"broadcast-{report['id']}"}

    # After its duration the broadcast is taken off; the screens go back to what they did.
    for screen in screens[:2]:
        # The request that waited behind the broadcast plays now.
        wait_until(partial(playing, screen, "http://127.0.0.1:9/req.html"), 8)
        assert screen.display.service.document_names() == ["lobby"]
    assert requests.get(f"{base}/x/broadcasts/{report['id']}", timeout=5).json()["ended"]


def test_broadcast_errors(scheduler: SchedulerService) -> None:
    base = scheduler.url
    body = {"group": "nobody", "content-item": "http://127.0.0.1:9/x.html", "duration": "1 min"}
    assert requests.post(f"{base}/x/broadcasts", json=body, timeout=5).status_code == 404
    bad = requests.post(f"{base}/x/broadcasts", json={**body, "duration": "soon"}, timeout=5)
    assert bad.status_code == 400 and bad.json()["field"] == "duration"
    assert requests.get(f"{base}/x/broadcasts/12", timeout=5).status_code == 404
