"""The meaning of a CDS (CDS.md, Meaning): windows, inheritance, priority, order, rotation,
remote sets, DST, and when the answer next changes. 2026-11-23 is a Monday."""

from __future__ import annotations

import datetime
import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cds.evaluate import Playlist, Selection, constraints_hold, next_window_change
from cds.model import (
    Constraints,
    ContentItem,
    ContentSet,
    DateWindow,
    DayWindow,
    TimeWindow,
)
from cds.parser import parse

from .helpers import (
    LONDON,
    NEW_YORK,
    at,
    content_set,
    dates,
    days,
    doc,
    duration,
    everything,
    item,
    name_of,
    playback,
    priority,
    times,
    utc,
)


def playlist(*docs: ContentSet, tz: datetime.tzinfo = LONDON, seed: int = 7) -> Playlist:
    result = Playlist(tz, random.Random(seed))
    result.set_documents(list(docs))
    return result


def names(selections: list[Selection]) -> list[str]:
    return [name_of(s.item) for s in selections]


def eligible_names(p: Playlist, when: datetime.datetime) -> list[str]:
    return names(p.eligible(when, everything))


def plays(p: Playlist, when: datetime.datetime, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(count):
        chosen = p.next(when, everything)
        assert chosen is not None
        found.append(name_of(chosen.item))
    return found


def is_eligible(constraint: str, when: datetime.datetime, tz: datetime.tzinfo = LONDON) -> bool:
    return bool(playlist(doc("s", item("a", constraint)), tz=tz).eligible(when, everything))


# ----------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        ("08:59:59", False),
        ("09:00:00", True),  # start inclusive
        ("12:00", True),
        ("16:59:59", True),
        ("17:00:00", False),  # end exclusive
        ("23:00", False),
    ],
)
def test_time_window_start_inclusive_end_exclusive(clock: str, expected: bool) -> None:
    assert is_eligible(times(("09:00", "17:00")), at(f"2026-11-23 {clock}")) is expected


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        ("2026-11-23 21:59", False),
        ("2026-11-23 22:00", True),
        ("2026-11-23 23:59:59", True),
        ("2026-11-24 00:00", True),
        ("2026-11-24 05:59:59", True),
        ("2026-11-24 06:00", False),
        ("2026-11-24 12:00", False),
    ],
)
def test_time_window_across_midnight(moment: str, expected: bool) -> None:
    assert is_eligible(times(("22:00", "06:00")), at(moment)) is expected


def test_time_window_to_2400_and_whole_day() -> None:
    assert is_eligible(times(("18:00", "24:00")), at("2026-11-23 23:59:59"))
    assert not is_eligible(times(("18:00", "24:00")), at("2026-11-23 00:00"))
    assert is_eligible(times(("00:00", "24:00")), at("2026-11-23 03:00"))


def test_several_time_windows_mean_any() -> None:
    lunch_or_evening = times(("12:00", "14:00"), ("18:00", "20:00"))
    assert is_eligible(lunch_or_evening, at("2026-11-23 13:00"))
    assert is_eligible(lunch_or_evening, at("2026-11-23 19:00"))
    assert not is_eligible(lunch_or_evening, at("2026-11-23 15:00"))


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        ("2026-11-27", True),  # Friday
        ("2026-11-28", True),
        ("2026-11-29", True),
        ("2026-11-30", True),  # Monday
        ("2026-12-01", False),  # Tuesday
        ("2026-12-02", False),
        ("2026-12-03", False),  # Thursday
    ],
)
def test_day_of_week_friday_to_monday_wraps(day: str, expected: bool) -> None:
    assert is_eligible(days(("friday", "monday")), at(f"{day} 12:00")) is expected
    assert is_eligible(days(("FRI", "Mon")), at(f"{day} 00:00")) is expected


def test_day_of_week_inclusive_and_several() -> None:
    weekdays = days(("monday", "friday"))
    assert is_eligible(weekdays, at("2026-11-23 00:00"))
    assert is_eligible(weekdays, at("2026-11-27 23:59:59"))
    assert not is_eligible(weekdays, at("2026-11-28 00:00"))
    tue_or_thu = days(("tue", "tue"), ("thu", "thu"))
    assert [is_eligible(tue_or_thu, at(f"2026-11-{d} 12:00")) for d in range(23, 30)] == [
        False,
        True,
        False,
        True,
        False,
        False,
        False,
    ]


def test_date_window_inclusive() -> None:
    advent = dates(("2026-12-01", "2026-12-24"))
    assert not is_eligible(advent, at("2026-11-30 23:59:59"))
    assert is_eligible(advent, at("2026-12-01 00:00"))
    assert is_eligible(advent, at("2026-12-24 23:59:59"))
    assert not is_eligible(advent, at("2026-12-25 00:00"))
    one_day = dates(("2026-12-31", "2026-12-31"), ("2027-01-02", "2027-01-02"))
    assert is_eligible(one_day, at("2026-12-31 10:00"))
    assert not is_eligible(one_day, at("2027-01-01 10:00"))
    assert is_eligible(one_day, at("2027-01-02 10:00"))


def test_all_kinds_of_window_must_hold_together() -> None:
    both = times(("09:00", "17:00")) + days(("monday", "friday"))
    assert is_eligible(both, at("2026-11-23 10:00"))
    assert not is_eligible(both, at("2026-11-28 10:00"))  # Saturday
    assert not is_eligible(both, at("2026-11-23 18:00"))


def test_windows_are_read_in_the_display_time_zone() -> None:
    window = times(("09:00", "17:00"))
    # 15:00 UTC is 10:00 in New York: open there, closed in Tokyo (00:00 next day).
    moment = utc("2026-11-23 15:00")
    assert is_eligible(window, moment, tz=NEW_YORK)
    from zoneinfo import ZoneInfo

    assert not is_eligible(window, moment, tz=ZoneInfo("Asia/Tokyo"))


# ----------------------------------------------------------------------------- DST


def test_spring_forward_window_in_the_missing_hour_opens_at_the_jump() -> None:
    """New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 never happens."""
    p = playlist(doc("s", item("a", times(("02:30", "03:30")))), tz=NEW_YORK)
    before = utc("2026-03-08 06:59:59")  # 01:59:59 EST
    assert p.eligible(before, everything) == []
    jump = utc("2026-03-08 07:00")  # 03:00 EDT
    assert p.next_change(before) == jump
    assert names(p.eligible(jump, everything)) == ["a"]
    closes = utc("2026-03-08 07:30")  # 03:30 EDT
    assert p.next_change(jump) == closes
    assert p.eligible(closes, everything) == []
    # The next day the window is a normal hour again.
    assert p.next_change(closes) == utc("2026-03-09 06:30")  # 02:30 EDT


def test_spring_forward_day_window_times_are_wall_clock() -> None:
    """Europe/London, 2026-03-29: 01:00 GMT jumps to 02:00 BST."""
    p = playlist(doc("s", item("a", times(("09:00", "10:00")))))
    assert p.next_change(utc("2026-03-29 00:00")) == utc("2026-03-29 08:00")  # 09:00 BST
    assert p.next_change(utc("2026-03-29 08:00")) == utc("2026-03-29 09:00")


def test_fall_back_window_in_the_repeated_hour_is_open_twice() -> None:
    """Europe/London, 2026-10-25: 02:00 BST falls back to 01:00 GMT; 01:30 happens twice."""
    p = playlist(doc("s", item("a", times(("01:30", "01:45")))))
    moments = [utc("2026-10-25 00:00")]
    for _ in range(4):
        change = p.next_change(moments[-1])
        assert change is not None
        moments.append(change.astimezone(datetime.UTC))
    assert moments[1:] == [
        utc("2026-10-25 00:30"),  # 01:30 BST opens
        utc("2026-10-25 00:45"),  # 01:45 BST closes
        utc("2026-10-25 01:30"),  # 01:30 GMT opens again
        utc("2026-10-25 01:45"),  # 01:45 GMT closes
    ]
    assert names(p.eligible(utc("2026-10-25 00:40"), everything)) == ["a"]
    assert p.eligible(utc("2026-10-25 01:00"), everything) == []
    assert names(p.eligible(utc("2026-10-25 01:40"), everything)) == ["a"]


def test_fall_back_reopening_at_the_jump_itself() -> None:
    """A 00:30-01:45 window closes at 01:45 BST and opens again when the clock goes back
    from 02:00 BST to 01:00 GMT: that instant is a change too."""
    p = playlist(doc("s", item("a", times(("00:30", "01:45")))))
    after_close = utc("2026-10-25 00:50")  # 01:50 BST
    assert p.eligible(after_close, everything) == []
    assert p.next_change(after_close) == utc("2026-10-25 01:00")  # 01:00 GMT
    assert names(p.eligible(utc("2026-10-25 01:00"), everything)) == ["a"]


def test_day_change_on_a_dst_day_is_local_midnight() -> None:
    p = playlist(doc("s", item("a", days(("sunday", "sunday")))))
    # Sunday 2026-10-25 in London starts at 00:00 BST (23:00 UTC the day before)...
    assert p.next_change(utc("2026-10-24 12:00")) == utc("2026-10-24 23:00")
    # ...and ends at 00:00 GMT.
    assert p.next_change(utc("2026-10-25 12:00")) == utc("2026-10-26 00:00")


# ----------------------------------------------------------------------------- next change


def test_next_change_none_without_windows() -> None:
    assert playlist(doc("s", item("a"), item("b"))).next_change(at("2026-11-23 10:00")) is None
    every_day = doc("s", item("a", days(("monday", "sunday")), times(("00:00", "00:00"))))
    assert playlist(every_day).next_change(at("2026-11-23 10:00")) is None


def test_next_change_is_the_earliest_over_sets_and_items() -> None:
    root = doc(
        "s",
        content_set(
            "inner", item("a", times(("09:30", "10:00"))), constraints=(times(("11:00", "12:00")),)
        ),
        item("b", dates(("2026-11-24", "2026-11-30"))),
        constraints=(days(("monday", "friday")),),
    )
    p = playlist(root)
    assert p.next_change(at("2026-11-23 09:00")) == at("2026-11-23 09:30")
    assert p.next_change(at("2026-11-23 10:00")) == at("2026-11-23 11:00")
    assert p.next_change(at("2026-11-23 12:00")) == at("2026-11-24 00:00")
    # Saturday: the weekday window opens on Monday, the date window ends before.
    assert p.next_change(at("2026-11-28 12:00")) == at("2026-11-29 09:30")


def test_next_change_far_away_date() -> None:
    p = playlist(doc("s", item("a", dates(("2030-01-01", "2030-01-31")))))
    assert p.next_change(at("2026-11-23 10:00")) == at("2030-01-01 00:00")
    assert p.next_change(at("2030-01-10 10:00")) == at("2030-02-01 00:00")
    assert p.next_change(at("2030-02-01 00:00")) is None


def test_next_change_is_strictly_after_now() -> None:
    p = playlist(doc("s", item("a", times(("09:00", "17:00")))))
    assert p.next_change(at("2026-11-23 09:00")) == at("2026-11-23 17:00")
    assert p.next_change(at("2026-11-23 17:00")) == at("2026-11-24 09:00")


def test_next_window_change_function_and_constraints_hold() -> None:
    root = doc("s", item("a"), constraints=(times(("22:00", "06:00")),))
    assert next_window_change([root.constraints], at("2026-11-23 23:00"), LONDON) == at(
        "2026-11-24 06:00"
    )
    assert constraints_hold(root.constraints, at("2026-11-23 23:00"))


# ----------------------------------------------------------------------------- inheritance


def test_item_needs_its_own_and_every_ancestor_window() -> None:
    root = doc(
        "top",
        content_set(
            "mid",
            item("a", times(("12:00", "13:00"))),
            item("b"),
            constraints=(days(("monday", "friday")),),
        ),
        item("c"),
        constraints=(times(("08:00", "18:00")),),
    )
    p = playlist(root)
    assert sorted(eligible_names(p, at("2026-11-23 12:30"))) == ["a", "b", "c"]
    assert sorted(eligible_names(p, at("2026-11-23 10:00"))) == ["b", "c"]
    assert sorted(eligible_names(p, at("2026-11-28 12:30"))) == ["c"]  # Saturday
    assert eligible_names(p, at("2026-11-23 19:00")) == []


def test_nearest_priority_duration_and_order_win() -> None:
    root = doc(
        "top",
        content_set(
            "mid",
            item("a"),
            item("b", priority("high"), duration("5 s")),
            constraints=(duration("20 seconds"),),
        ),
        constraints=(priority("low"), duration("1 minute"), playback("reverseorder")),
    )
    p = playlist(root)
    by_name = {name_of(v.item): v for v in p.eligible(at("2026-11-23 10:00"), everything)}
    assert list(by_name) == ["b"]  # only the highest level plays
    assert (by_name["b"].priority, by_name["b"].duration) == (3, 5.0)
    low = playlist(
        doc(
            "top",
            content_set("mid", item("a"), constraints=(duration("20 s"),)),
            constraints=(priority("low"), duration("1 minute")),
        )
    )
    only = low.eligible(at("2026-11-23 10:00"), everything)[0]
    assert (only.priority, only.duration) == (1, 20.0)
    # reverseorder inherited by the child set
    ordered = playlist(
        doc(
            "top",
            content_set("mid", item("a"), item("b"), item("c")),
            constraints=(playback("reverseorder"),),
        )
    )
    assert plays(ordered, at("2026-11-23 10:00"), 4) == ["c", "b", "a", "c"]


def test_defaults_medium_and_no_duration() -> None:
    chosen = playlist(doc("s", item("a"))).next(at("2026-11-23 10:00"), everything)
    assert chosen is not None
    assert (chosen.priority, chosen.duration) == (2, None)


def test_selection_fields() -> None:
    root = doc("lobby", item("x"), content_set("news", item("y"), content_set(None, item("z"))))
    p = playlist(root)
    by_name = {name_of(s.item): s for s in p.eligible(at("2026-11-23 10:00"), everything)}
    assert by_name["x"].key == "lobby/0"
    assert by_name["y"].key == "lobby/1.0"
    assert by_name["z"].key == "lobby/1.1.0"
    assert by_name["z"].root_name == "lobby"
    assert by_name["z"].set_path == ("lobby", "news", None)
    assert by_name["z"].url == "http://example.org/z"


# ----------------------------------------------------------------------------- priority


def test_only_the_highest_eligible_level_plays() -> None:
    root = doc(
        "s",
        item("normal"),
        item("alert", priority("highest"), times(("12:00", "12:05"))),
        item("promo", priority("low")),
    )
    p = playlist(root)
    assert eligible_names(p, at("2026-11-23 11:00")) == ["normal"]
    assert p.top_priority(at("2026-11-23 11:00"), everything) == 2
    assert eligible_names(p, at("2026-11-23 12:01")) == ["alert"]
    assert p.top_priority(at("2026-11-23 12:01"), everything) == 4
    assert plays(p, at("2026-11-23 12:01"), 3) == ["alert"] * 3


def test_preemption_next_change_is_the_opening_of_a_higher_set() -> None:
    root = doc(
        "s",
        content_set("daily", item("a"), item("b")),
        content_set(
            "news", item("flash"), constraints=(priority("high"), times(("12:00", "12:10")))
        ),
    )
    p = playlist(root)
    before = at("2026-11-23 11:58:30")
    assert p.top_priority(before, everything) == 2
    opening = p.next_change(before)
    assert opening == at("2026-11-23 12:00")
    assert opening is not None
    assert p.top_priority(opening, everything) == 3
    assert names(p.eligible(opening, everything)) == ["flash"]
    assert p.next_change(opening) == at("2026-11-23 12:10")
    assert sorted(eligible_names(p, at("2026-11-23 12:10"))) == ["a", "b"]


def test_unavailable_items_do_not_count_for_priority() -> None:
    root = doc("s", item("a"), item("urgent", priority("high")))
    p = playlist(root)

    def not_urgent(it: ContentItem) -> bool:
        return not it.url.endswith("urgent")

    assert names(p.eligible(at("2026-11-23 10:00"), not_urgent)) == ["a"]
    assert p.top_priority(at("2026-11-23 10:00"), not_urgent) == 2
    assert p.next(at("2026-11-23 10:00"), lambda _item: False) is None
    assert p.top_priority(at("2026-11-23 10:00"), lambda _item: False) is None


# ----------------------------------------------------------------------------- order


def test_inorder_is_document_order_and_cycles() -> None:
    p = playlist(doc("s", item("a"), item("b"), item("c")))
    assert plays(p, at("2026-11-23 10:00"), 7) == ["a", "b", "c", "a", "b", "c", "a"]


def test_reverseorder() -> None:
    p = playlist(doc("s", item("a"), item("b"), item("c"), constraints=(playback("reverseorder"),)))
    assert plays(p, at("2026-11-23 10:00"), 5) == ["c", "b", "a", "c", "b"]


def test_order_continues_when_an_item_drops_out() -> None:
    p = playlist(doc("s", item("a"), item("b", times(("10:00", "11:00"))), item("c")))
    assert plays(p, at("2026-11-23 10:30"), 2) == ["a", "b"]
    assert plays(p, at("2026-11-23 11:30"), 3) == ["c", "a", "c"]


@pytest.mark.parametrize("size", [2, 3, 5])
def test_random_fresh_shuffle_each_round_never_twice_in_a_row(size: int) -> None:
    letters = [chr(ord("a") + i) for i in range(size)]
    p = playlist(
        doc("s", *(item(x) for x in letters), constraints=(playback("random"),)), seed=size
    )
    played = plays(p, at("2026-11-23 10:00"), size * 300)
    assert all(first != second for first, second in itertools.pairwise(played))
    rounds = [played[i : i + size] for i in range(0, len(played), size)]
    assert all(sorted(r) == letters for r in rounds)  # every round plays each item once
    if size > 2:  # with two items "never twice in a row" leaves a single order
        assert len({tuple(r) for r in rounds}) > 1  # the order really changes


def test_random_single_item_repeats() -> None:
    p = playlist(doc("s", item("a"), constraints=(playback("random"),)))
    assert plays(p, at("2026-11-23 10:00"), 3) == ["a", "a", "a"]


def test_random_is_reproducible_with_a_seeded_rng() -> None:
    def run() -> list[str]:
        p = playlist(
            doc("s", *(item(x) for x in "abcdef"), constraints=(playback("random"),)), seed=3
        )
        return plays(p, at("2026-11-23 10:00"), 30)

    assert run() == run()


# ----------------------------------------------------------------------------- rotation


def test_sibling_sets_share_the_screen_round_robin() -> None:
    root = doc(
        "s", content_set("one", item("a1")), content_set("many", *(item(f"b{i}") for i in range(5)))
    )
    p = playlist(root)
    played = plays(p, at("2026-11-23 10:00"), 100)
    assert played[:6] == ["a1", "b0", "a1", "b1", "a1", "b2"]
    counts = Counter("one" if x == "a1" else "many" for x in played)
    assert counts == {"one": 50, "many": 50}


def test_items_and_sets_mixed_take_turns_as_slots() -> None:
    root = doc("s", item("x"), content_set("inner", item("i1"), item("i2")), item("y"))
    p = playlist(root)
    assert plays(p, at("2026-11-23 10:00"), 6) == ["x", "i1", "y", "x", "i2", "y"]


def test_several_documents_round_robin() -> None:
    p = playlist(doc("lobby", item("l1"), item("l2"), item("l3")), doc("news", item("n1")))
    assert plays(p, at("2026-11-23 10:00"), 6) == ["l1", "n1", "l2", "n1", "l3", "n1"]


def test_avoid_context_switch_plays_the_set_back_to_back() -> None:
    root = doc(
        "s",
        content_set(
            "block", item("a1"), item("a2"), item("a3"), constraints=(playback(avoid=True),)
        ),
        content_set("other", item("b1"), item("b2")),
    )
    p = playlist(root)
    assert plays(p, at("2026-11-23 10:00"), 9) == [
        "a1", "a2", "a3", "b1", "a1", "a2", "a3", "b2", "a1",
    ]  # fmt: skip


def test_without_avoid_context_switch_sets_interleave() -> None:
    root = doc(
        "s",
        content_set("block", item("a1"), item("a2"), item("a3")),
        content_set("other", item("b1"), item("b2")),
    )
    assert plays(playlist(root), at("2026-11-23 10:00"), 6) == ["a1", "b1", "a2", "b2", "a3", "b1"]


def test_avoid_context_switch_with_nested_sets_plays_each_item_once() -> None:
    root = doc(
        "s",
        content_set(
            "block",
            content_set("x", item("x1"), item("x2"), item("x3")),
            content_set("y", item("y1")),
            constraints=(playback(avoid=True),),
        ),
        item("z"),
    )
    assert plays(playlist(root), at("2026-11-23 10:00"), 5) == ["x1", "y1", "x2", "x3", "z"]


def test_higher_priority_interrupts_a_pass_which_then_resumes() -> None:
    root = doc(
        "s",
        content_set(
            "block", item("a1"), item("a2"), item("a3"), constraints=(playback(avoid=True),)
        ),
        content_set("other", item("b1")),
        content_set(
            "alert", item("fire"), constraints=(priority("highest"), times(("10:01", "10:02")))
        ),
    )
    p = playlist(root)
    assert plays(p, at("2026-11-23 10:00"), 1) == ["a1"]
    assert plays(p, at("2026-11-23 10:01"), 2) == ["fire", "fire"]
    assert plays(p, at("2026-11-23 10:03"), 4) == ["a2", "a3", "b1", "a1"]


def test_eligible_is_the_upcoming_order_and_does_not_advance() -> None:
    root = doc("s", content_set("one", item("a1"), item("a2")), content_set("two", item("b1")))
    p = playlist(root)
    now = at("2026-11-23 10:00")
    assert plays(p, now, 1) == ["a1"]
    upcoming = eligible_names(p, now)
    assert upcoming == ["b1", "a2", "a1"]
    assert eligible_names(p, now) == upcoming
    assert plays(p, now, 3) == ["b1", "a2", "b1"]


def test_set_documents_keeps_rotation_of_sets_that_remain() -> None:
    first = doc("s", item("a"), item("b"), item("c"))
    p = playlist(first)
    now = at("2026-11-23 10:00")
    assert plays(p, now, 1) == ["a"]
    p.set_documents([doc("s", item("a"), item("b"), item("c")), doc("extra", item("e"))])
    assert plays(p, now, 3) == ["e", "b", "e"]
    p.set_documents([])
    assert p.next(now, everything) is None


def test_documents_and_keys_without_names() -> None:
    p = playlist(doc(None, item("a")), doc(None, item("b")))
    keys = [s.key for s in p.eligible(at("2026-11-23 10:00"), everything)]
    assert keys == ["#0/0", "#1/0"]


# ----------------------------------------------------------------------------- remote sets


REMOTE = (
    '<content-set name="{name}" type="remote">{constraints}<requires-file><sources>'
    '<uri refresh="5 minutes">{uri}</uri></sources></requires-file></content-set>'
)


def remote(name: str, uri: str, *constraints: str) -> str:
    from .helpers import sc

    return REMOTE.format(name=name, uri=uri, constraints=sc(*constraints) if constraints else "")


def test_remote_set_is_listed_resolved_by_key_and_constrained_from_above() -> None:
    root = doc(
        "lobby",
        item("local"),
        remote("news", "http://cms.example/news.xml", times(("09:00", "17:00"))),
    )
    p = playlist(root)
    now = at("2026-11-23 10:00")
    [pending] = p.remote_sets()
    assert (pending.key, pending.uris, pending.refresh, pending.resolved) == (
        "lobby/1",
        ("http://cms.example/news.xml",),
        300.0,
        False,
    )
    assert eligible_names(p, now) == ["local"]
    fetched = doc("news-feed", item("n1"), item("n2", times(("09:00", "09:30"))))
    p.set_remote("lobby/1", fetched)
    assert p.remote_sets()[0].resolved
    selections = {name_of(s.item): s for s in p.eligible(at("2026-11-23 09:15"), everything)}
    assert set(selections) == {"local", "n1", "n2"}
    assert selections["n2"].key == "lobby/1.0.1"
    assert selections["n2"].set_path == ("lobby", "news", "news-feed")
    # The remote set's own window closes over the fetched document's items.
    assert eligible_names(p, at("2026-11-23 18:00")) == ["local"]
    assert sorted(eligible_names(p, now)) == ["local", "n1"]
    p.set_remote("lobby/1", None)
    assert eligible_names(p, now) == ["local"]


def test_remote_set_resolved_by_uri_and_nested_remote() -> None:
    p = playlist(doc("lobby", remote("a", "http://x/a.xml")))
    p.set_remote("http://x/a.xml", doc("a-doc", item("a1"), remote("b", "http://x/b.xml")))
    assert [r.key for r in p.remote_sets()] == ["lobby/0", "lobby/0.0.1"]
    p.set_remote("http://x/b.xml", doc("b-doc", item("b1")))
    assert sorted(eligible_names(p, at("2026-11-23 10:00"))) == ["a1", "b1"]


def test_remote_set_that_refers_to_itself_is_not_expanded_forever() -> None:
    p = playlist(doc("lobby", remote("a", "http://x/a.xml")))
    p.set_remote("http://x/a.xml", doc("a-doc", item("a1"), remote("again", "http://x/a.xml")))
    assert eligible_names(p, at("2026-11-23 10:00")) == ["a1"]


def test_remote_root_document() -> None:
    root = parse(REMOTE.format(name="feed", uri="https://x/feed.xml", constraints="")).root
    p = playlist(root)
    assert [r.key for r in p.remote_sets()] == ["feed"]
    p.set_remote("feed", doc("inner", item("i")))
    [chosen] = p.eligible(at("2026-11-23 10:00"), everything)
    assert chosen.key == "feed/0.0"


# ----------------------------------------------------------------------------- explain


def test_explain_names_the_constraint_that_excludes_each_item() -> None:
    root = doc(
        "lobby",
        item("always"),
        item("lunch", times(("12:00", "14:00"))),
        content_set("weekend", item("sat"), constraints=(days(("saturday", "sunday")),)),
        item("quiet", priority("low")),
        item("missing"),
    )
    p = playlist(root)
    verdicts = {
        v.url.rsplit("/", 1)[1]: v
        for v in p.explain(at("2026-11-23 18:02"), lambda i: not i.url.endswith("missing"))
    }
    assert verdicts["always"].eligible and verdicts["always"].reasons == []
    assert verdicts["always"].position == 0
    assert verdicts["lunch"].reasons == [
        "time window 12:00-14:00 (the item itself) is closed at 18:02 Europe/London"
    ]
    assert verdicts["sat"].reasons == [
        "day-of-week saturday-sunday (set 'weekend') does not include monday"
    ]
    assert not verdicts["quiet"].eligible
    assert "priority low is below medium" in verdicts["quiet"].reasons[0]
    assert "not available" in verdicts["missing"].reasons[0]
    # Both kinds of reason are given when both apply.
    both = p.explain(at("2026-11-23 18:02"), lambda i: not i.url.endswith("lunch"))
    lunch = next(v for v in both if v.url.endswith("lunch"))
    assert len(lunch.reasons) == 2
    assert "not available" in lunch.reasons[1]


def test_explain_reports_unfetched_remote_sets() -> None:
    p = playlist(doc("lobby", remote("news", "http://x/news.xml")))
    [verdict] = p.explain(at("2026-11-23 10:00"), everything)
    assert verdict.kind == "remote-set"
    assert verdict.reasons == ["remote set 'news' has not been fetched yet"]


def test_availability_errors_count_as_unavailable() -> None:
    def broken(_item: ContentItem) -> bool:
        raise OSError("cache gone")

    assert playlist(doc("s", item("a"))).next(at("2026-11-23 10:00"), broken) is None


# ----------------------------------------------------------------------------- the examples


def test_campus_example() -> None:
    from pathlib import Path

    root = parse(Path(__file__).parent / "data" / "campus.xml").root
    p = playlist(root)
    monday_noon = at("2026-11-23 12:00")
    assert sorted(eligible_names(p, monday_noon)) == [
        "offers.html",
        "queue.html",
        "today.png",
        "welcome.html",
    ]
    # The countdown pre-empts everything across midnight on New Year's Eve...
    for moment in ("2026-12-31 23:55", "2027-01-01 00:09:59"):
        [only] = p.eligible(at(moment), everything)
        assert (name_of(only.item), only.priority, only.duration) == ("countdown.webm", 4, 900.0)
    # ...and the player is told to wake up when it starts and ends.
    assert p.next_change(at("2026-12-31 23:00")) == at("2026-12-31 23:55")
    assert p.next_change(at("2027-01-01 00:00")) == at("2027-01-01 00:10")
    # At night only the low-priority page is left.
    assert eligible_names(p, at("2026-11-24 02:00")) == ["night.html"]
    [news] = p.remote_sets()
    assert (news.key, news.refresh) == ("campus/5", 600.0)


def test_windows_at_the_ends_of_the_calendar() -> None:
    from zoneinfo import ZoneInfo

    tokyo = ZoneInfo("Asia/Tokyo")
    p = playlist(
        doc("s", item("a", dates(("0001-01-01", "9999-12-31")), times(("09:00", "10:00")))),
        tz=tokyo,
    )
    assert p.next_change(at("2026-11-23 09:30", tokyo)) == at("2026-11-23 10:00", tokyo)
    assert p.next_change(at("9999-12-31 12:00", tokyo)) is None
    assert names(p.eligible(at("0001-01-01 09:30", tokyo), everything)) == ["a"]
    assert p.next_change(at("0001-01-01 01:00", tokyo)) is None  # before UTC's year 1


# ----------------------------------------------------------------------------- a property

_ZONES = st.sampled_from([LONDON, NEW_YORK, datetime.UTC])
_CLOCKS = st.sampled_from(
    [datetime.time(h, m) for h in (0, 1, 2, 3, 9, 12, 22, 23) for m in (0, 30)]
    + [datetime.time(1, 45, 10)]
)
_TIMES = st.lists(st.builds(TimeWindow, _CLOCKS, _CLOCKS), min_size=1, max_size=2)
_DAYS = st.lists(st.builds(DayWindow, st.integers(0, 6), st.integers(0, 6)), max_size=2)
_DATES = st.lists(
    st.tuples(
        st.dates(datetime.date(2026, 3, 1), datetime.date(2026, 11, 30)), st.integers(0, 20)
    ).map(lambda pair: DateWindow(pair[0], pair[0] + datetime.timedelta(days=pair[1]))),
    max_size=2,
)
# Around both DST changes of 2026 in Europe and America, and an ordinary week.
_INSTANTS = st.sampled_from(
    [
        utc("2026-03-08 00:00"),
        utc("2026-03-28 12:00"),
        utc("2026-10-24 12:00"),
        utc("2026-10-31 20:00"),
        utc("2026-06-10 07:00"),
    ]
).flatmap(
    lambda base: st.integers(0, 3 * 86400).map(lambda s: base + datetime.timedelta(seconds=s))
)


@settings(max_examples=150, deadline=None)
@given(_ZONES, _TIMES, _DAYS, _DATES, _INSTANTS)
def test_next_change_is_exactly_when_some_window_flips(
    tz: datetime.tzinfo,
    time_windows: list[TimeWindow],
    day_windows: list[DayWindow],
    date_windows: list[DateWindow],
    now: datetime.datetime,
) -> None:
    parts = [
        Constraints(times=time_windows),
        Constraints(days=day_windows),
        Constraints(dates=date_windows),
    ]

    def state(moment: datetime.datetime) -> tuple[bool, ...]:
        local = moment.astimezone(tz)
        return tuple(constraints_hold(part, local) for part in parts)

    change = next_window_change(parts, now, tz)
    if change is None:
        for hours in (1, 7, 25, 24 * 8):
            assert state(now + datetime.timedelta(hours=hours)) == state(now)
        return
    assert change > now
    assert state(change) != state(now)
    assert state(change - datetime.timedelta(microseconds=1)) == state(now)
    span = change - now
    for fraction in (0.25, 0.5, 0.75):
        assert state(now + span * fraction) == state(now)


def test_time_windows_wait_for_a_trusted_clock() -> None:
    """A display booted without NTP may think it is any date: windowed items wait, others play."""
    trusted = False
    p = Playlist(LONDON, random.Random(1), clock_trusted=lambda: trusted)
    p.set_documents(
        [
            doc("s", item("always"), item("office", times(("00:00", "23:59")))),
            doc("t", item("dated", dates(("2000-01-01", "2100-01-01")))),
        ]
    )
    when = at("2026-11-23 10:00")
    assert eligible_names(p, when) == ["always"]
    verdicts = {v.url.rsplit("/", 1)[1]: v for v in p.explain(when, everything)}
    assert not verdicts["office"].eligible
    assert any("clock is not set" in reason for reason in verdicts["office"].reasons)
    trusted = True
    assert sorted(eligible_names(p, when)) == ["always", "dated", "office"]


def test_a_failing_clock_check_keeps_windows_closed() -> None:
    def broken() -> bool:
        raise OSError("timedatectl vanished")

    p = Playlist(LONDON, clock_trusted=broken)
    p.set_documents([doc("s", item("office", times(("00:00", "23:59"))), item("always"))])
    assert eligible_names(p, at("2026-11-23 10:00")) == ["always"]
