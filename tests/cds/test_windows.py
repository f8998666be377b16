"""Window arithmetic (docs/cds.md, "Windows"): time, day-of-week and date windows, DST, and when
the answer next changes. 2026-11-23 is a Monday."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cds.model import Constraints, DateWindow, DayWindow, TimeWindow
from cds.windows import constraints_hold, next_window_change

from .helpers import (
    LONDON,
    NEW_YORK,
    at,
    content_set,
    dates,
    days,
    doc,
    everything,
    is_eligible,
    item,
    names,
    playlist,
    times,
    utc,
)

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
