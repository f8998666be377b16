"""Parsing: what real documents use is accepted, anything else is refused with its line."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from cds.errors import CdsError, Problem
from cds.model import ContentItem, ContentSet, DateWindow, DayWindow, Hash, Source, TimeWindow
from cds.parser import parse

from .helpers import content_set, days, item, times

DATA = Path(__file__).parent / "data"
URI = "<requires-file><sources><uri>http://example.org/a</uri></sources></requires-file>"


def problems(data: str | bytes) -> list[Problem]:
    with pytest.raises(CdsError) as caught:
        parse(data)
    return caught.value.problems


def only_problem(data: str | bytes) -> Problem:
    found = problems(data)
    assert len(found) == 1, found
    return found[0]


def constraints_of(xml: str) -> ContentSet:
    return parse(content_set("s", item("a"), constraints=(xml,))).root


# ----------------------------------------------------------------------------- accepted


def test_spec_example_shape() -> None:
    document = parse(DATA / "lobby.xml")
    root = document.root
    assert (root.name, root.type) == ("lobby", "inline")
    assert root.constraints.order == "random"
    assert root.constraints.avoid_context_switch is False
    assert root.constraints.times == [TimeWindow(datetime.time(8), datetime.time(18))]
    assert root.constraints.days == [DayWindow(0, 4)]
    assert root.constraints.priority == 2
    first = root.children[0]
    assert isinstance(first, ContentItem)
    assert first.content_type == "text/html; charset=utf-8"
    assert first.size == 5120
    assert first.url == "http://content.example.org/lobby/welcome.html"
    assert first.files[0].hashes == [
        Hash("md5", "9e107d9d372bb6826bd81d3542a419d6"),
        Hash("sha1", "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    ]
    second = root.children[1]
    assert isinstance(second, ContentItem)
    assert second.files[0].hashes == [Hash("md5", "e4d909c290d0fb1ca068ffaddf22cbd0")]
    assert [s.uri for s in second.files[0].sources] == [
        "http://content.example.org/lobby/map.png",
        "https://mirror.example.org/lobby/map.png",
    ]
    third = root.children[2]
    assert isinstance(third, ContentItem)
    assert third.constraints.preferred_duration == 45.0
    assert document.warnings == []


@pytest.mark.parametrize("wrapper", ["subscription-update", "subscription_update"])
def test_subscription_update_wrapper(wrapper: str) -> None:
    document = parse(
        f'<{wrapper} uri="http://scheduler.example/schedule/7/">'
        f"{content_set('lobby', item('a'))}</{wrapper}>"
    )
    assert document.wrapper_uri == "http://scheduler.example/schedule/7/"
    assert document.root.name == "lobby"


def test_wrapper_needs_exactly_one_set() -> None:
    problem = only_problem('<subscription-update uri="http://x/"></subscription-update>')
    assert problem.line == 1
    assert "exactly one <content-set>" in problem.message


def test_single_quotes_whitespace_and_free_order() -> None:
    document = parse(
        b"""<?xml version='1.0' encoding='UTF-8'?>
        <content-set   name = 'lobby'
              type='inline' >
          <content-item
             size = ' 10   bytes '>
             <requires-file>
               <sources> <uri>
                  http://example.org/a
               </uri> </sources>
               <hashes><hash type=' MD5 '> 9E107D9D372BB6826BD81D3542A419D6 </hash></hashes>
             </requires-file>
             <constraints> <scheduling-constraints>
               <priority level='HIGH'/>
               <time> <between end=' 17:00 ' start='09:00'/> </time>
             </scheduling-constraints> </constraints>
          </content-item>
          <constraints><scheduling-constraints>
            <playback order=' Random '/>
          </scheduling-constraints></constraints>
        </content-set>"""
    )
    root = document.root
    assert root.constraints.order == "random"
    only = root.children[0]
    assert isinstance(only, ContentItem)
    assert only.size == 10
    assert only.url == "http://example.org/a"
    assert only.files[0].hashes == [Hash("md5", "9e107d9d372bb6826bd81d3542a419d6")]
    assert only.constraints.priority == 3
    assert only.constraints.times == [TimeWindow(datetime.time(9), datetime.time(17))]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("monday", "friday", DayWindow(0, 4)),
        ("FRI", "Mon", DayWindow(4, 0)),
        ("Saturday", "SUNDAY", DayWindow(5, 6)),
        ("wed", "wednesday", DayWindow(2, 2)),
        ("tue", "thu", DayWindow(1, 3)),
    ],
)
def test_day_names_full_or_short_any_case(start: str, end: str, expected: DayWindow) -> None:
    assert constraints_of(days((start, end))).constraints.days == [expected]


@pytest.mark.parametrize(
    ("level", "expected"),
    [("lowest", 0), ("low", 1), ("medium", 2), ("high", 3), ("Highest", 4), ("0", 0), ("4", 4)],
)
def test_priority_names_or_numbers(level: str, expected: int) -> None:
    assert constraints_of(f'<priority level="{level}"/>').constraints.priority == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("09:00", datetime.time(9)),
        ("9:05", datetime.time(9, 5)),
        ("09:00:30", datetime.time(9, 0, 30)),
        ("23:59:59", datetime.time(23, 59, 59)),
        ("24:00", datetime.time(0)),
    ],
)
def test_time_forms(text: str, expected: datetime.time) -> None:
    window = constraints_of(times(("06:00", text))).constraints.times[0]
    assert window.end == expected


def test_several_windows_and_dates() -> None:
    root = constraints_of(
        times(("08:00", "10:00"), ("16:00", "18:00"))
        + '<date><between start="2026-12-01" end="2026-12-24"/></date>'
        + '<date><between start="2027-01-01" end="2027-01-01"/></date>'
    )
    assert len(root.constraints.times) == 2
    assert root.constraints.dates == [
        DateWindow(datetime.date(2026, 12, 1), datetime.date(2026, 12, 24)),
        DateWindow(datetime.date(2027, 1, 1), datetime.date(2027, 1, 1)),
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30 seconds", 30.0), ("2 minutes", 120.0), ("PT1M30S", 90.0), ("45", 45.0)],
)
def test_preferred_duration_forms(text: str, seconds: float) -> None:
    duration = f"<preferred-duration>{text}</preferred-duration>"
    assert constraints_of(duration).constraints.preferred_duration == seconds


def test_nested_sets_and_mixed_children() -> None:
    root = parse(
        content_set("top", item("a"), content_set("inner", item("b"), item("c")), item("d"))
    ).root
    assert [type(child).__name__ for child in root.children] == [
        "ContentItem",
        "ContentSet",
        "ContentItem",
    ]
    assert [i.url[-1] for i in root.walk_items()] == ["a", "b", "c", "d"]
    assert [s.name for s in root.walk_sets()] == ["top", "inner"]


def test_remote_set() -> None:
    root = parse(
        '<content-set name="top"><content-set name="news" type="remote"><requires-file>'
        '<sources><uri refresh="2 minutes">https://news.example/cds.xml</uri></sources>'
        "</requires-file></content-set></content-set>"
    ).root
    remote = root.children[0]
    assert isinstance(remote, ContentSet)
    assert remote.type == "remote"
    assert remote.requires_file is not None
    assert remote.requires_file.sources == [Source("https://news.example/cds.xml", 120.0)]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1 week", 604800.0), ("2 wks", 1209600.0), ("3 days", 259200.0), ("1 hr 30 mins", 5400.0)],
)
def test_durations_in_every_unit_wherever_the_grammar_has_one(text: str, seconds: float) -> None:
    """A CDS from a deployed Yarely system writes its refresh in weeks: both places a CDS has a
    duration (a remote set's <uri refresh> and <preferred-duration>) read every unit."""
    root = parse(
        f'<content-set name="top"><content-set name="news" type="remote"><requires-file>'
        f'<sources><uri refresh="{text}">https://news.example/cds.xml</uri></sources>'
        "</requires-file></content-set></content-set>"
    ).root
    remote = root.children[0]
    assert isinstance(remote, ContentSet) and remote.requires_file is not None
    assert remote.requires_file.sources == [Source("https://news.example/cds.xml", seconds)]
    constrained = constraints_of(f"<preferred-duration>{text}</preferred-duration>")
    assert constrained.constraints.preferred_duration == seconds


def test_a_duration_in_an_unknown_unit_names_it_with_its_line() -> None:
    problem = only_problem(
        content_set(
            "s", item("a"), constraints=("<preferred-duration>2 fortnights</preferred-duration>",)
        )
    )
    assert "fortnights" in problem.message and "weeks" in problem.message


def test_type_defaults() -> None:
    remote = parse(
        "<content-set><requires-file><sources><uri>file:///srv/a.xml</uri></sources>"
        "</requires-file></content-set>"
    ).root
    assert remote.type == "remote"
    assert parse(content_set("a", item("x"))).root.type == "inline"
    # An empty named set is how a schedule is withdrawn: it must parse.
    empty = parse('<content-set name="lobby"/>').root
    assert (empty.type, empty.children) == ("inline", [])


def test_auth_and_feedback_are_kept_without_warning() -> None:
    document = parse(
        '<content-set name="a"><auth><token kind="x">secret</token></auth>'
        "<feedback><uri>http://x/</uri></feedback>" + item("a") + "</content-set>"
    )
    assert document.root.auth == '<auth><token kind="x">secret</token></auth>'
    assert document.root.feedback == "<feedback><uri>http://x/</uri></feedback>"
    assert document.warnings == []


def test_unknown_elements_and_attributes_are_kept_with_warnings() -> None:
    document = parse(
        """<content-set name="a" colour="red">
  <x-note lang="en">hello <b>there</b></x-note>
  <content-item>
    <requires-file><sources><uri>http://example.org/a</uri></sources></requires-file>
    <constraints><scheduling-constraints>
      <time><between start="09:00" end="10:00" why="opening"/></time>
    </scheduling-constraints></constraints>
  </content-item>
</content-set>"""
    )
    root = document.root
    assert root.extras.attributes == {("", "colour"): "red"}
    assert root.extras.elements == {"": ['<x-note lang="en">hello <b>there</b></x-note>']}
    only = root.children[0]
    assert isinstance(only, ContentItem)
    assert only.constraints.extras.attributes == {("time/between[0]", "why"): "opening"}
    assert [(w.line, w.element) for w in document.warnings] == [
        (1, "content-set"),
        (2, "x-note"),
        (6, "between"),
    ]
    assert "not part of the CDS grammar" in document.warnings[1].message


def test_bytes_text_and_path_inputs(tmp_path: Path) -> None:
    text = content_set("a", item("ü"))
    path = tmp_path / "a.xml"
    path.write_text(text, encoding="utf-8")
    from_text = parse(text)
    assert parse(text.encode()) == from_text
    assert parse(path) == from_text
    assert from_text.root.walk_items()[0].url == "http://example.org/ü"
    # Text with an encoding declaration is still read as the text it is.
    assert parse('<?xml version="1.0" encoding="ISO-8859-1"?>' + text) == from_text


def test_utf16_document() -> None:
    assert parse(content_set("a", item("b")).encode("utf-16")).root.name == "a"


# ----------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        (
            times(("9am", "17:00")),
            "<between> in <time> needs start like 09:00 or 09:00:00, got '9am'",
        ),
        (times(("09:00", "25:00")), "needs end like 09:00 or 09:00:00, got '25:00'"),
        (times(("09:60", "10:00")), "got '09:60'"),
        ('<time><between start="09:00"/></time>', "<between> in <time> needs end"),
        ("<time></time>", "<time> needs at least one <between"),
        (days(("funday", "mon")), "day name such as monday or mon, got 'funday'"),
        (days(("thurs", "mon")), "got 'thurs'"),
        (
            '<date><between start="2026-02-30" end="2026-03-01"/></date>',
            "'2026-02-30' is not a date in the calendar",
        ),
        (
            '<date><between start="2026-12-24" end="2026-12-01"/></date>',
            "ends (2026-12-01) before it starts (2026-12-24)",
        ),
        ('<date><between start="24/12/2026" end="2026-12-01"/></date>', "like 2026-12-24"),
        ('<priority level="urgent"/>', "got 'urgent'"),
        ("<priority/>", "<priority> needs a level"),
        ('<priority level="5"/>', "got '5'"),
        ('<playback order="shuffle"/>', "inorder, reverseorder or random, got 'shuffle'"),
        ('<playback avoid-context-switch="maybe"/>', "true or false, got 'maybe'"),
        ("<preferred-duration>soon</preferred-duration>", "'soon' is not a duration"),
        ("<preferred-duration>0 seconds</preferred-duration>", "not a positive duration"),
        ('<priority level="high"/><priority level="low"/>', "at most one <priority>"),
    ],
)
def test_constraint_errors_name_line_and_problem(snippet: str, message: str) -> None:
    document = (
        '<content-set name="a">\n<constraints>\n<scheduling-constraints>\n'
        f"{snippet}\n</scheduling-constraints>\n</constraints>\n{item('a')}\n</content-set>"
    )
    found = problems(document)
    assert any(message in p.message for p in found), found
    assert all(p.line == 4 for p in found), found


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("<content-item/>", 2, "a <content-item> needs a <requires-file>"),
        (
            "<content-item><requires-file><hashes/></requires-file></content-item>",
            2,
            "<requires-file> needs <sources>",
        ),
        (
            "<content-item><requires-file><sources/></requires-file></content-item>",
            2,
            "<sources> needs at least one <uri>",
        ),
        (
            "<content-item><requires-file><sources><uri>ftp://x/a</uri></sources>"
            "</requires-file></content-item>",
            2,
            "a content item must be an http or https address",
        ),
        (
            "<content-item><requires-file><sources><uri>/relative/a.html</uri></sources>"
            "</requires-file></content-item>",
            2,
            "absolute",
        ),
        (
            '<content-item><requires-file><hashes><hash type="md5">abc</hash></hashes>'
            "<sources><uri>http://x/a</uri></sources></requires-file></content-item>",
            2,
            "needs a digest of 32 hexadecimal digits, got 'abc'",
        ),
        (
            '<content-item><requires-file><hashes><hash type="crc32">abcd</hash></hashes>'
            "<sources><uri>http://x/a</uri></sources></requires-file></content-item>",
            2,
            "<hash> type must be md5, sha1 or sha256, got 'crc32'",
        ),
        (
            f'<content-item size="big">{URI}</content-item>',
            2,
            "size must be a number of bytes like '1234 bytes', got 'big'",
        ),
        ("<time/>", 2, "<time> does not belong inside <content-set>"),
        (f"<constraints/><constraints/>{item('a')}", 2, "at most one <constraints>"),
        ("some words", 1, "contains the text 'some words' outside any element"),
        (f'<content-set type="remote">{item("a")}</content-set>', 2, "cannot hold items"),
        ('<content-set type="remote"/>', 2, 'type="remote"> needs <requires-file>'),
        ('<content-set type="sideways"/>', 2, "type must be inline or remote"),
        (URI + item("a"), 1, 'only for type="remote" sets'),
    ],
)
def test_structure_errors(body: str, line: int, message: str) -> None:
    found = problems(f'<content-set name="a">\n{body}\n</content-set>')
    assert any(message in p.message and p.line == line for p in found), found


def test_every_problem_is_reported() -> None:
    found = problems(
        '<content-set name="a">\n'
        + item("a", times(("9am", "10:00")))
        + "\n"
        + item("b", '<priority level="urgent"/>')
        + "\n<content-item/>\n</content-set>"
    )
    assert [p.line for p in found] == [2, 3, 4]


def test_message_reads_with_line() -> None:
    problem = problems(
        '<content-set name="a">\n\n\n\n\n\n' + item("a", times(("9am", "17:00"))) + "</content-set>"
    )[0]
    assert str(problem) == (
        "line 7: <between> in <time> needs start like 09:00 or 09:00:00, got '9am'"
    )
    assert problem.element == "between"


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (
            "<content-set>\n<content-item><requires-file><http-source>http://x/a</http-source>"
            "</requires-file></content-item></content-set>",
            2,
            "<http-source> is an old form",
        ),
        (
            '<content-set>\n<constraints><scheduling-constraints>\n<time><play-on day="mon"/>'
            f"</time></scheduling-constraints></constraints>{item('a')}</content-set>",
            3,
            "<play-on> is an old form",
        ),
        ("\n<content-collection/>", 2, "<content-collection> is an old form"),
        (
            '<subscription-update uri="http://x/">\n<content-collection/></subscription-update>',
            2,
            "<content-collection> is an old form",
        ),
    ],
)
def test_legacy_forms_refused_with_element_and_line(data: str, line: int, words: str) -> None:
    found = problems(data)
    assert any(words in p.message and p.line == line for p in found), found


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"hello", "not an XML document"),
        (b"<content-set>", "ends before <content-set>"),
        (b"<content-set></content-item>", "does not close <content-set>"),
        (b"<playlist/>", "a CDS starts with <content-set"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not"),
        (b"<content-set/><content-set/>", "more after the end of the root element"),
        (b"<content-set name=a/>", "quotes"),
    ],
)
def test_not_a_cds(data: bytes, words: str) -> None:
    found = problems(data)
    assert words in found[0].message


def test_file_problems(tmp_path: Path) -> None:
    assert "no such file" in problems_path(tmp_path / "missing.xml")
    assert "directory" in problems_path(tmp_path)


def problems_path(path: Path) -> str:
    with pytest.raises(CdsError) as caught:
        parse(path)
    return str(caught.value)


def test_error_is_picklable_and_readable() -> None:
    import pickle

    with pytest.raises(CdsError) as caught:
        parse(b"<nope/>")
    again = pickle.loads(pickle.dumps(caught.value))
    assert again.problems == caught.value.problems
    assert str(again).startswith("line 1: ")


def test_package_exports() -> None:
    import cds

    assert sorted(cds.__all__) == sorted(cds._EXPORTS)
    assert cds.parse(b'<content-set name="a"/>').root.name == "a"
    assert cds.CdsError is CdsError
    with pytest.raises(AttributeError):
        _ = cds.nothing_here
