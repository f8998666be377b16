"""The meaning of a CDS (docs/cds.md, "What it means") beyond the windows: inheritance,
priority, order, rotation, remote sets and explanations. 2026-11-23 is a Monday."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from cds.model import ContentItem
from cds.parser import parse
from cds.playlist import Playlist

from .helpers import (
    LONDON,
    at,
    content_set,
    dates,
    days,
    doc,
    duration,
    eligible_names,
    everything,
    item,
    name_of,
    names,
    playback,
    playlist,
    plays,
    priority,
    times,
)

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
