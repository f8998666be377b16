"""Zones in the CDS: the ``<layout>`` grammar, its templates and boxes, every refusal at its
line, the round trip, the schema, and which zones could play a video."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from cds.errors import CdsError
from cds.layouts import (
    TEMPLATES,
    could_play_video,
    is_live_stream,
    video_zones,
    zone_boxes,
    zone_document,
)
from cds.model import ContentItem, ContentSet, Document, Layout, Node, RequiredFile, Source, Zone
from cds.parser import parse
from cds.relaxng import schema
from cds.serialise import to_xml

from .test_cli import cds_cli
from .test_roundtrip import CONSTRAINTS, CONTENT_ITEM, draw_extras


def page(name: str, content_type: str = "text/html") -> str:
    return (
        f'<content-item content-type="{content_type}"><requires-file><sources>'
        f"<uri>https://example.org/{name}</uri></sources></requires-file></content-item>"
    )


def document(layout: str, *sets: tuple[str, str], constraints: str = "") -> bytes:
    """A root set 'lobby' holding ``layout`` (its first line is line 2) and the sets named."""
    held = "".join(f'<content-set name="{name}">{body}</content-set>' for name, body in sets)
    return f'<content-set name="lobby">{constraints}\n{layout}\n{held}</content-set>'.encode()


def refused(data: bytes, **options: int) -> list[tuple[int | None, str]]:
    with pytest.raises(CdsError) as caught:
        parse(data, **options)  # type: ignore[arg-type]
    return [(problem.line, problem.message) for problem in caught.value.problems]


MAIN_TICKER = '<layout template="main+ticker"><zone name="main" set="promos"/><zone name="ticker" set="news"/></layout>'  # noqa: E501
SETS = (("promos", page("a.html")), ("news", page("news.rss", "application/rss+xml")))


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_every_template_names_main_and_fills_the_screen_without_overlap(template: str) -> None:
    zones = TEMPLATES[template]
    assert next(iter(zones)) == "main"
    area = 0.0
    for box in zones.values():
        assert box.x >= 0 and box.y >= 0 and box.width > 0 and box.height > 0
        assert box.x + box.width <= 1 + 1e-9 and box.y + box.height <= 1 + 1e-9
        area += box.width * box.height
    assert area == pytest.approx(1.0)  # the whole screen, and (with no overlap below) once
    for a, b in itertools.combinations(zones.values(), 2):
        overlap_x = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
        overlap_y = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
        assert overlap_x <= 1e-9 or overlap_y <= 1e-9
    # Each template parses when each of its zones names a set.
    layout = f'<layout template="{template}">' + "".join(
        f'<zone name="{name}" set="s{index}"/>' for index, name in enumerate(zones)
    )
    sets = [(f"s{index}", page(f"{index}.html")) for index in range(len(zones))]
    parsed = parse(document(layout + "</layout>", *sets)).root
    assert parsed.layout is not None and parsed.layout.template == template
    boxes = zone_boxes(parsed.layout)
    assert [(b.name, b.x, b.y, b.width, b.height) for b in boxes] == [
        (name, box.x, box.y, box.width, box.height) for name, box in zones.items()
    ]
    assert [b.z for b in boxes] == [0] + [1] * (len(zones) - 1)


def test_a_zone_overrides_its_box_and_a_zone_of_its_own_gives_one() -> None:
    layout = (
        '<layout template="main+ticker">'
        '<zone name="main" set="promos"/>'
        '<zone name="ticker" set="news" y="0.92" height="0.08" z="5"/>'
        '<zone name="logo" set="logo" x="0.9" y="0" width="0.1" height=".1" z="7"/>'
        "</layout>"
    )
    root = parse(document(layout, *SETS, ("logo", page("logo.png", "image/png")))).root
    assert root.layout is not None
    boxes = {box.name: box for box in zone_boxes(root.layout)}
    assert (boxes["ticker"].y, boxes["ticker"].height, boxes["ticker"].x) == (0.92, 0.08, 0)
    assert (boxes["ticker"].width, boxes["ticker"].z) == (1, 5)
    assert (boxes["logo"].x, boxes["logo"].height, boxes["logo"].z) == (0.9, 0.1, 7)
    assert boxes["main"].set_name == "promos"
    # Without a template every zone gives its box; z follows the layout's order.
    free = (
        '<layout><zone name="main" set="promos" x="0" y="0" width="1" height="1"/>'
        '<zone name="news" set="news" x="0.1" y="0.8" width="0.8" height="0.1"/></layout>'
    )
    root = parse(document(free, *SETS)).root
    assert root.layout is not None and root.layout.template is None
    assert [(b.name, b.z) for b in zone_boxes(root.layout)] == [("main", 0), ("news", 1)]


@pytest.mark.parametrize(
    ("layout", "line", "message"),
    [
        ('<layout template="main+news"><zone name="main" set="promos"/></layout>', 2,
         "template 'main+news' is not known; the templates are full, main+ticker"),
        ('<layout template="main+ticker"><zone name="main" set="promos"/></layout>', 2,
         "template 'main+ticker' has the zone 'ticker': give it a set"),
        ('<layout><zone name="ticker" set="news" x="0" y="0" width="1" height="1"/></layout>', 2,
         'needs a zone named "main"'),
        ('<layout template="full">\n<zone name="main"/></layout>', 3,
         "<zone> 'main' has no set"),
        ('<layout template="full">\n<zone name="main" set="nowhere"/></layout>', 1,
         "plays the set 'nowhere', which is not a child"),
        ('<layout template="main+ticker"><zone name="main" set="promos"/>\n'
         '<zone name="ticker" set="promos"/></layout>', 1,
         "the set 'promos' is played by two zones ('main' and 'ticker')"),
        ('<layout template="full"><zone name="main" set="promos"/>\n'
         '<zone name="main" set="news" x="0" y="0" width="1" height="1"/></layout>', 3,
         "<zone> 'main' is named twice"),
        ('<layout template="full">\n<zone name="Main" set="promos"/></layout>', 3,
         "name 'Main' must be 1 to 40 lower-case letters"),
        ('<layout template="full"><zone name="main" set="promos"/>\n'
         '<zone name="side" set="news" x="0.5" y="0"/></layout>', 3,
         "<zone> 'side' needs its box (template 'full' has no zone 'side'): give width, height"),
        ('<layout><zone name="main" set="promos"/>\n</layout>', 2,
         "<zone> 'main' needs its box (a layout without a template): give x, y, width, height"),
        ('<layout template="full">\n<zone name="main" set="promos" width="1.2"/></layout>', 3,
         "width must be a fraction of the screen from 0 to 1, got '1.2'"),
        ('<layout template="full">\n<zone name="main" set="promos" x="-0.1"/></layout>', 3,
         "x must be a fraction of the screen from 0 to 1, got '-0.1'"),
        ('<layout template="full">\n<zone name="main" set="promos" x="0.5"/></layout>', 3,
         "goes outside the screen or is empty"),
        ('<layout template="full">\n<zone name="main" set="promos" height="0"/></layout>', 3,
         "goes outside the screen or is empty"),
        ('<layout template="full">\n<zone name="main" set="promos" z="top"/></layout>', 3,
         "z must be a whole number from 0 to 99, got 'top'"),
        ("<layout/>", 2, '<layout> needs <zone name="main" set="..."/>'),
    ],
)  # fmt: skip
def test_a_wrong_layout_is_refused_at_its_line(layout: str, line: int, message: str) -> None:
    problems = refused(document(layout, *SETS))
    assert any(found == line and message in text for found, text in problems), problems


def test_layouts_out_of_place_are_refused_at_their_line() -> None:
    two = document(
        MAIN_TICKER + '\n<layout template="full"><zone name="main" set="promos"/></layout>', *SETS
    )
    assert (3, "a <content-set> has at most one <layout>") in refused(two)
    nested = (
        b'<content-set name="lobby">\n<content-set name="inner">\n'
        b'<layout template="full"><zone name="main" set="promos"/></layout>\n'
        b'<content-set name="promos">' + page("a.html").encode() + b"</content-set>"
        b"</content-set></content-set>"
    )
    assert any(
        line == 3 and "belongs on the document's root <content-set>" in text
        for line, text in refused(nested)
    )
    in_item = (
        b'<content-set name="lobby"><content-item><requires-file><sources>'
        b"<uri>https://example.org/a</uri></sources></requires-file>\n"
        b'<layout template="full"/></content-item></content-set>'
    )
    assert any(line == 2 and "<layout> does not belong inside" in t for line, t in refused(in_item))
    zone_alone = b'<content-set name="lobby">\n<zone name="main" set="x"/></content-set>'
    assert any(
        line == 2 and "<zone> does not belong inside" in t for line, t in refused(zone_alone)
    )


def test_a_layout_set_holds_only_the_sets_its_zones_play() -> None:
    stray = document(MAIN_TICKER, *SETS, ("spare", page("spare.html"))).replace(
        b"</content-set></content-set>",
        b"</content-set>\n" + page("x.html").encode() + b"</content-set>",
    )
    problems = refused(stray)
    assert sum("holds only the sets its zones play" in text for _, text in problems) == 2
    assert any(line == 4 and "this <content-item> belongs inside" in t for line, t in problems)
    twins = document(MAIN_TICKER, *SETS, ("news", page("again.html")))
    assert any("two child sets are named 'news'" in text for _, text in refused(twins))


def test_video_zones_main_always_counts_and_every_zone_with_a_video_or_a_stream() -> None:
    layout = (
        '<layout template="l-shape"><zone name="main" set="promos"/>'
        '<zone name="side" set="side"/><zone name="ticker" set="news"/></layout>'
    )
    pictures = document(
        layout, ("promos", page("a.png", "image/png")), ("side", page("s.html")), SETS[1]
    )
    assert video_zones(parse(pictures).root) == ["main"]
    parse(pictures, video_zones=1)  # taken: the main zone alone may play a video
    with_video = document(layout, SETS[0], ("side", page("clip.mp4", "")), SETS[1])
    assert video_zones(parse(with_video).root) == ["main", "side"]
    problems = refused(with_video, video_zones=1)
    assert problems == [
        (
            2,
            "the layout of set 'lobby' could play 2 videos at once (zones main, side: the main "
            "zone always counts, and every zone with a video or a live stream); this display "
            "plays at most 1 ([screen] video-zones)",
        )
    ]
    assert parse(with_video, video_zones=2).root.layout is not None
    streams = document(layout, SETS[0], ("side", page("s.html")), ("news", page("tv.m3u8", "")))
    assert video_zones(parse(streams).root) == ["main", "ticker"]
    remote = document(
        layout,
        SETS[0],
        (
            "side",
            '<content-set type="remote"><requires-file><sources><uri>https://example.org/s.xml'
            "</uri></sources></requires-file></content-set>",
        ),
        SETS[1],
    ).replace(b'<content-set type="remote">', b'\n<content-set type="remote">')
    assert any(
        line == 4 and "a zone's set cannot hold a remote <content-set>" in text
        for line, text in refused(remote)
    )
    assert parse(with_video).warnings == []


def test_live_streams_are_told_by_type_address_or_scheme() -> None:
    def item(uri: str, content_type: str | None = None) -> ContentItem:
        return ContentItem([RequiredFile([Source(uri)])], content_type=content_type)

    assert is_live_stream(item("https://e.org/tv", "application/vnd.apple.mpegurl"))
    assert is_live_stream(item("https://e.org/tv", "application/x-mpegURL; charset=utf-8"))
    assert is_live_stream(item("https://e.org/live/index.M3U8?token=1"))
    assert is_live_stream(item("rtsp://camera.lan/stream"))
    assert is_live_stream(item("srt://e.org:9000"))
    assert not is_live_stream(item("https://e.org/a.mp4", "video/mp4"))
    assert not is_live_stream(item("https://e.org/m3u8.html", "text/html"))
    assert could_play_video(ContentSet(children=[item("rtsps://camera.lan/s")]))
    assert could_play_video(ContentSet(children=[item("https://e.org/a.webm")]))
    assert not could_play_video(ContentSet(children=[item("https://e.org/a.png", "image/png")]))


def test_a_zone_plays_its_set_under_the_layout_sets_name_and_constraints() -> None:
    constraints = (
        '<constraints><scheduling-constraints><priority level="high"/>'
        '<time><between start="08:00" end="18:00"/></time></scheduling-constraints></constraints>'
    )
    root = parse(document(MAIN_TICKER, *SETS, constraints=constraints)).root
    played = zone_document(root, "ticker")
    assert played is not None
    assert (played.name, played.constraints, played.layout) == ("lobby", root.constraints, None)
    assert played.children == [root.children[1]]
    assert zone_document(root, "side") is None


@pytest.mark.parametrize(
    "layout",
    [
        MAIN_TICKER,
        '<layout template="main+ticker" x:note="1" xmlns:x="urn:x">'
        '<zone name="main" set="promos" z="3"/>'
        '<zone name="ticker" set="news" y="0.925" height="0.075" colour="red"><x:hint/></zone>'
        "<x:extra/></layout>",
        '<layout><zone name="main" set="promos" x="0" y="0" width="0.00001" height="1"/>'
        '<zone name="news" set="news" x=".5" y="0.5" width="0.5" height="0.5" z="0"/></layout>',
    ],
)
def test_layouts_round_trip_and_what_is_written_passes_the_schema(layout: str) -> None:
    original = parse(document(layout, *SETS))
    written = to_xml(original)
    again = parse(written)
    assert again == original
    assert to_xml(again) == written
    assert schema().validate(etree.fromstring(written))
    assert b"e-05" not in written  # fractions are written as decimals, never exponents


def test_the_schema_knows_the_layout_grammar() -> None:
    """The RELAX NG schema alone (without the walk) takes a layout and refuses a zone with no
    name or a box beyond the screen, and a layout element out of place."""

    def valid(text: bytes) -> bool:
        return bool(schema().validate(etree.fromstring(text)))

    assert valid(document(MAIN_TICKER, *SETS))
    assert not valid(document('<layout template="full"><zone set="promos"/></layout>', *SETS))
    assert not valid(document('<layout><zone name="main" set="p" x="1.5"/></layout>', *SETS))
    assert not valid(document('<layout template="full"/>', *SETS))
    assert not valid(
        b'<content-set name="a"><content-item><requires-file><sources><uri>https://e.org/</uri>'
        b'</sources></requires-file><layout template="full"/></content-item></content-set>'
    )


def test_pdn_cds_check_names_the_layout_and_counts_video_zones(tmp_path: Path) -> None:
    layout = (
        '<layout template="main+sidebar"><zone name="main" set="promos"/>'
        '<zone name="side" set="side"/></layout>'
    )
    path = tmp_path / "lobby.xml"
    path.write_bytes(document(layout, SETS[0], ("side", page("clip.mp4", "video/mp4"))))
    checked = cds_cli("check", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "layout main+sidebar (zones main, side)" in checked.stdout
    assert cds_cli("check", "--video-zones", "2", path).returncode == 0
    refused_here = cds_cli("check", "--video-zones", "1", path)
    assert refused_here.returncode == 1
    assert refused_here.stdout.startswith(
        f"{path}:2: the layout of set 'lobby' could play 2 videos"
    )
    assert cds_cli("check", "--video-zones", "0", path).returncode == 2


# ----------------------------------------------------------------------------- generated

_OTHER_ZONES = st.sampled_from(["ticker", "side", "logo", "clock", "a-1", "b_2"])
_THOUSANDTHS = st.integers(0, 999)


@st.composite
def box(draw: st.DrawFn) -> tuple[float, float, float, float]:
    """A box inside the screen, in thousandths."""
    x, y = draw(_THOUSANDTHS), draw(_THOUSANDTHS)
    width, height = draw(st.integers(1, 1000 - x)), draw(st.integers(1, 1000 - y))
    return x / 1000, y / 1000, width / 1000, height / 1000


@st.composite
def layout_document(draw: st.DrawFn) -> Document:
    """A root set with a layout (a template's zones, or zones of their own) and the sets they
    play, with constraints and unknowns anywhere."""
    template = draw(st.none() | st.sampled_from(sorted(TEMPLATES)))
    if template is not None:
        names = list(TEMPLATES[template])
    else:
        names = ["main", *draw(st.lists(_OTHER_ZONES, max_size=3, unique=True))]
    zones: list[Zone] = []
    for index, name in enumerate(names):
        given = draw(box()) if template is None or draw(st.booleans()) else None
        x, y, width, height = given if given is not None else (None, None, None, None)
        zone = Zone(name, f"set {index}", x, y, width, height, draw(st.none() | st.integers(0, 99)))
        if draw(st.booleans()):
            zone.extras = draw_extras(draw, [""], [""])
        zones.append(zone)
    layout = Layout(zones, template)
    if draw(st.booleans()):
        layout.extras = draw_extras(draw, [""], [""])
    sets: list[Node] = [
        ContentSet(
            name=zone.set_name,
            constraints=draw(CONSTRAINTS),
            children=draw(st.lists(CONTENT_ITEM, min_size=1, max_size=2)),
        )
        for zone in zones
    ]
    order = draw(st.permutations(range(len(sets))))
    root = ContentSet(
        name=draw(st.none() | st.just("lobby")),
        constraints=draw(CONSTRAINTS),
        children=[sets[i] for i in order],
        layout=layout,
    )
    return Document(root=root)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_document())
def test_generated_layouts_round_trip_and_pass_the_schema(document: Document) -> None:
    written = to_xml(document)
    assert parse(written) == document
    assert schema().validate(etree.fromstring(written)), schema().error_log
    assert document.root.layout is not None
    boxes = zone_boxes(document.root.layout)
    assert {b.name for b in boxes} == {z.name for z in document.root.layout.zones}
    for found in boxes:
        assert found.x >= 0 and found.x + found.width <= 1 + 1e-9
        assert found.y >= 0 and found.y + found.height <= 1 + 1e-9
