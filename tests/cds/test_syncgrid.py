"""Synchronised sets (docs/cds.md, "Screens that change together"): the grid, its epoch, its
shuffle, and the playlist that plays it. Everything with an injected instant; 2026-11-23 is a
Monday."""

from __future__ import annotations

import datetime
import itertools
import random

import pytest

from cds.errors import CdsError
from cds.model import ContentItem
from cds.parser import parse
from cds.playlist import Playlist
from cds.serialise import to_xml
from cds.syncgrid import cycle_order, epoch_at, slot_at

from .helpers import (
    LONDON,
    at,
    content_set,
    doc,
    duration,
    everything,
    item,
    name_of,
    priority,
    times,
)

UTC = datetime.UTC


def sync(order: str = "inorder") -> str:
    return f'<playback order="{order}" sync="wall-clock"/>'


def video(name: str, *constraints: str) -> str:
    return item(name, *constraints, content_type="video/mp4")


def wall(*children: str, order: str = "inorder", extra: tuple[str, ...] = ()) -> Playlist:
    p = Playlist(LONDON, random.Random(1))
    p.set_documents([doc("wall", *children, constraints=(sync(order), *extra))])
    return p


def turn(p: Playlist, when: datetime.datetime) -> tuple[str, float]:
    """Whose turn it is at ``when``, and how many seconds into it."""
    chosen = p.next(when, everything)
    assert chosen is not None and chosen.slot is not None
    return name_of(chosen.item), chosen.slot.offset(when)


# -------------------------------------------------------------------------------- parsing


def test_sync_is_read_written_and_read_again() -> None:
    root = parse(content_set("wall", item("a"), constraints=(sync("random"),))).root
    assert root.constraints.sync == "wall-clock"
    assert root.constraints.order == "random"
    again = parse(to_xml(root)).root
    assert again == root
    assert b'sync="wall-clock"' in to_xml(root)


@pytest.mark.parametrize(
    ("document", "line", "message"),
    [
        (
            '<content-set name="w">\n<constraints><scheduling-constraints>\n'
            '<playback sync="ntp"/>\n</scheduling-constraints></constraints>\n</content-set>',
            3,
            "sync must be wall-clock (the only kind there is), got 'ntp'",
        ),
        (
            '<content-set name="w">\n<content-item>\n<constraints><scheduling-constraints>\n'
            '<playback sync="wall-clock"/>\n</scheduling-constraints></constraints>\n'
            "<requires-file><sources><uri>http://a/1</uri></sources></requires-file>\n"
            "</content-item>\n</content-set>",
            4,
            "goes on a <content-set>",
        ),
        (
            '<content-set name="w">\n<constraints><scheduling-constraints>'
            '<playback sync="wall-clock"/></scheduling-constraints></constraints>\n'
            '<content-set name="inner">\n<constraints><scheduling-constraints>'
            '<playback sync="wall-clock"/></scheduling-constraints></constraints>\n'
            "</content-set>\n</content-set>",
            3,
            "cannot hold another synchronised set",
        ),
        (
            '<content-set name="w">\n<constraints><scheduling-constraints>'
            '<playback sync="wall-clock"/></scheduling-constraints></constraints>\n'
            '<content-set type="remote">\n<requires-file><sources><uri>http://a/x.xml</uri>'
            "</sources></requires-file>\n</content-set>\n</content-set>",
            3,
            "a remote <content-set> cannot be inside a set with",
        ),
        (
            '<content-set name="w" type="remote">\n<constraints><scheduling-constraints>'
            '<playback sync="wall-clock"/></scheduling-constraints></constraints>\n'
            "<requires-file><sources><uri>http://a/x.xml</uri></sources></requires-file>\n"
            "</content-set>",
            1,
            "put it on an inline set",
        ),
    ],
)
def test_a_bad_sync_names_its_line(document: str, line: int, message: str) -> None:
    with pytest.raises(CdsError) as raised:
        parse(document)
    found = raised.value.problems
    assert any(p.line == line and message in p.message for p in found), found


# ---------------------------------------------------------------------------------- grid


def test_the_grid_repeats_the_cycle_from_local_midnight() -> None:
    p = wall(item("a", duration("10 s")), item("b", duration("20 s")), item("c", duration("30 s")))
    # The cycle is 60 s from midnight in London (GMT in November): 09:00:00 starts a cycle.
    assert turn(p, at("2026-11-23 09:00:00")) == ("a", 0.0)
    assert turn(p, at("2026-11-23 09:00:09.5")) == ("a", 9.5)
    assert turn(p, at("2026-11-23 09:00:10")) == ("b", 0.0)
    assert turn(p, at("2026-11-23 09:00:45")) == ("c", 15.0)
    assert turn(p, at("2026-11-23 09:01:00")) == ("a", 0.0)
    chosen = p.next(at("2026-11-23 09:00:45"), everything)
    assert chosen is not None and chosen.slot is not None
    assert chosen.slot.start == at("2026-11-23 09:00:30")
    assert chosen.slot.end == at("2026-11-23 09:01:00")
    assert chosen.slot.cycle == 9 * 60
    # The engine sleeps until the next turn.
    assert p.next_change(at("2026-11-23 09:00:45")) == at("2026-11-23 09:01:00")


def test_durations_preferred_then_the_videos_own_length_then_the_default() -> None:
    lengths = {"http://example.org/v": 7.25}
    p = Playlist(LONDON, natural_length=lambda found: lengths.get(found.url))
    p.set_documents(
        [
            doc(
                "wall",
                item("page"),
                video("v"),
                item("short", duration("5 s")),
                constraints=(sync(),),
            )
        ]
    )
    # 15 (default) + 7.25 (the video's own) + 5 = 27.25 s; midnight is a cycle start.
    assert turn(p, at("2026-11-23 00:00:14")) == ("page", 14.0)
    assert turn(p, at("2026-11-23 00:00:15")) == ("v", 0.0)
    assert turn(p, at("2026-11-23 00:00:22.5")) == ("short", 0.25)
    assert turn(p, at("2026-11-23 00:00:27.25")) == ("page", 0.0)


def test_a_set_waits_until_its_videos_length_is_known() -> None:
    lengths: dict[str, float] = {}
    p = Playlist(LONDON, natural_length=lambda found: lengths.get(found.url))
    p.set_documents([doc("wall", item("page"), video("v"), constraints=(sync(),))])
    when = at("2026-11-23 09:00:00")
    assert p.next(when, everything) is None  # no grid without the video's length
    (status,) = p.sync_status(when)
    assert "the length of the video http://example.org/v is not known" in str(status["waiting"])
    lengths["http://example.org/v"] = 5.0  # downloaded: its length is read from the file
    assert turn(p, when) == ("page", 0.0)  # 09:00 is 1620 whole cycles of 20 s


def test_the_epoch_is_the_window_start_of_that_day() -> None:
    p = wall(
        item("a", duration("7 s")),
        item("b", duration("7 s")),
        extra=(times(("09:00:05", "17:00")),),
    )
    assert turn(p, at("2026-11-23 09:00:05")) == ("a", 0.0)
    assert turn(p, at("2026-11-23 09:00:12")) == ("b", 0.0)
    assert turn(p, at("2026-11-23 09:00:19")) == ("a", 0.0)
    # Closed before the window: nothing of the set plays.
    assert p.next(at("2026-11-23 09:00:04"), everything) is None


def test_a_window_across_midnight_counts_from_the_evening_it_opened() -> None:
    epoch, after = epoch_at(at("2026-11-24 02:00"), LONDON, parse_windows("22:00", "06:00"))
    assert epoch == at("2026-11-23 22:00")
    assert after == at("2026-11-24 22:00")


def test_the_epoch_of_a_day_with_a_clock_change_is_its_real_midnight() -> None:
    # 2026-03-29: London goes from GMT to BST at 01:00; the day is 23 hours long.
    epoch, after = epoch_at(at("2026-03-29 12:00"), LONDON, [])
    assert epoch == datetime.datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
    assert after == datetime.datetime(2026, 3, 29, 23, 0, tzinfo=UTC)
    # The day's last cycle is cut at the next midnight: every display cuts it alike.
    slot = slot_at(
        datetime.datetime(2026, 3, 29, 22, 59, 58, tzinfo=UTC),
        [7.0],
        "inorder",
        "w",
        epoch,
        after,
        LONDON,
    )
    assert slot is not None
    assert slot.start == datetime.datetime(2026, 3, 29, 22, 59, 56, tzinfo=UTC)
    assert slot.end == after  # 4 s of its 7: the 23-hour day is no whole number of cycles


def parse_windows(start: str, end: str) -> list:  # type: ignore[type-arg]
    root = parse(content_set("w", item("a"), constraints=(times((start, end)),))).root
    return root.constraints.times


def test_reverseorder_plays_the_grid_backwards() -> None:
    p = wall(item("a"), item("b"), item("c"), order="reverseorder")
    when = at("2026-11-23 09:00:00")
    assert [turn(p, when + datetime.timedelta(seconds=15 * i))[0] for i in range(4)] == [
        "c",
        "b",
        "a",
        "c",
    ]


# -------------------------------------------------------------------------------- shuffle


def test_the_seeded_shuffle_is_the_same_for_two_playlists_and_new_each_cycle() -> None:
    children = [item(name, duration("10 s")) for name in "abcdefg"]
    one = Playlist(LONDON, random.Random(1))
    two = Playlist(LONDON, random.Random(99))  # the rotation's own generator plays no part
    one.set_documents([doc("wall", *children, constraints=(sync("random"),))])
    two.set_documents([parse(to_xml(doc("wall", *children, constraints=(sync("random"),)))).root])
    start = at("2026-11-23 00:00:00") + datetime.timedelta(seconds=70 * 463)  # a cycle's start
    seen_one = [turn(one, start + datetime.timedelta(seconds=10 * i))[0] for i in range(70)]
    seen_two = [turn(two, start + datetime.timedelta(seconds=10 * i))[0] for i in range(70)]
    assert seen_one == seen_two
    cycles = [seen_one[i : i + 7] for i in range(0, 70, 7)]
    assert all(sorted(cycle) == list("abcdefg") for cycle in cycles)  # each a permutation
    assert len({tuple(cycle) for cycle in cycles}) > 5  # shuffled afresh
    assert all(a != b for a, b in itertools.pairwise(seen_one))  # never twice


def test_the_shuffle_is_fixed_by_name_day_and_cycle_alone() -> None:
    day = datetime.date(2026, 11, 23)
    # Computed once on this machine: any Python, any machine must agree (sha256, no random).
    assert cycle_order(5, "random", "wall", day, 7) == cycle_order(5, "random", "wall", day, 7)
    assert cycle_order(5, "random", "wall", day, 7) == [2, 1, 4, 0, 3]
    assert cycle_order(5, "random", "lobby", day, 7) != cycle_order(5, "random", "wall", day, 7)
    assert cycle_order(2, "random", "wall", day, 7) == [0, 1]  # alternating is all it can do


# ------------------------------------------------------------------- the playlist around it


def test_a_synchronised_set_holds_the_screen_and_the_rotation_waits() -> None:
    p = Playlist(LONDON, random.Random(1))
    p.set_documents(
        [
            doc("news", item("n1"), item("n2")),
            doc("wall", item("w1"), item("w2"), constraints=(sync(), times(("10:00", "11:00")))),
        ]
    )
    assert name_of(p.next(at("2026-11-23 09:59:00"), everything).item) == "n1"  # type: ignore[union-attr]
    assert turn(p, at("2026-11-23 10:00:20")) == ("w2", 5.0)
    assert [name_of(s.item) for s in p.eligible(at("2026-11-23 10:00:20"), everything)] == ["w2"]
    # The window closes: the rotation goes on where it was.
    assert name_of(p.next(at("2026-11-23 11:00:00"), everything).item) == "n2"  # type: ignore[union-attr]


def test_an_item_missing_here_gives_its_turn_to_the_others_never_shifts_the_grid() -> None:
    missing = {"http://example.org/w2"}

    def here(found: ContentItem) -> bool:
        return found.url not in missing

    p = Playlist(LONDON, random.Random(1))
    p.set_documents(
        [
            doc("news", item("n1")),
            doc("wall", item("w1"), item("w2"), item("w3"), constraints=(sync(),)),
        ]
    )
    assert name_of(p.next(at("2026-11-23 09:00:01"), here).item) == "w1"  # type: ignore[union-attr]
    during = p.next(at("2026-11-23 09:00:16"), here)  # w2's turn: not downloaded here
    assert during is not None and name_of(during.item) == "n1" and during.slot is None
    after = p.next(at("2026-11-23 09:00:31"), here)
    assert after is not None and name_of(after.item) == "w3" and after.slot is not None
    verdicts = {name_of_url(v.url): v for v in p.explain(at("2026-11-23 09:00:31"), here)}
    assert any(
        "w3's turn" in reason or "example.org/w3" in reason for reason in verdicts["w1"].reasons
    )
    assert "a synchronised set holds the screen while it plays" in verdicts["n1"].reasons


def name_of_url(url: str) -> str:
    return url.rsplit("/", 1)[1]


def test_a_higher_priority_interrupts_and_the_set_rejoins_at_the_turn_of_now() -> None:
    p = Playlist(LONDON, random.Random(1))
    p.set_documents(
        [
            doc("wall", item("w1"), item("w2"), item("w3"), constraints=(sync(),)),
            doc(
                "alarm",
                item("fire", times(("09:00:10", "09:00:40"))),
                constraints=(priority("highest"),),
            ),
        ]
    )
    assert turn(p, at("2026-11-23 09:00:05")) == ("w1", 5.0)
    assert name_of(p.next(at("2026-11-23 09:00:20"), everything).item) == "fire"  # type: ignore[union-attr]
    # Back at 09:00:40: the grid's turn of now, 10 s into w3, not the top of the set.
    assert turn(p, at("2026-11-23 09:00:40")) == ("w3", 10.0)
