"""parse(to_xml(x)) == x, for documents we write and for generated models, unknowns included;
and every document the serialiser writes passes the shipped RELAX NG schema."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from cds.elements import canonical_xml
from cds.model import (
    HASH_TYPES,
    Constraints,
    ContentItem,
    ContentSet,
    DateWindow,
    DayWindow,
    Document,
    Extras,
    Hash,
    Node,
    RequiredFile,
    Source,
    TimeWindow,
)
from cds.parser import parse
from cds.relaxng import schema
from cds.serialise import to_xml

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.xml")), ids=lambda p: p.name)
def test_example_files_round_trip(path: Path) -> None:
    document = parse(path)
    written = to_xml(document)
    assert written.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n')
    again = parse(written)
    assert again == document
    assert [(w.line is not None, w.element) for w in again.warnings] == [
        (w.line is not None, w.element) for w in document.warnings
    ]
    assert to_xml(again) == written  # a fixed point after one pass


def test_unknowns_survive_in_place() -> None:
    original = parse(
        b"""<subscription_update uri='http://s.example/schedule/1/'>
<content-set name='a' xmlns:x='urn:x' x:flag='1' colour='red'>
  <x:extension><x:inner a='b'>text</x:inner></x:extension>
  <constraints note='c'>
    <scheduling-constraints level='s'>
      <playback future='yes'/>
      <time w='1'><between start='09:00' end='10:00' why='open'/><x-hint/></time>
      <priority level='high' source='cms'><x-why>launch</x-why></priority>
      <preferred-duration unit='s'>30</preferred-duration>
      <x-weather>sunny</x-weather>
    </scheduling-constraints>
    <x-other/>
  </constraints>
  <content-item content-type='text/html' data-id='42'>
    <requires-file cache='no'>
      <hashes algo='x'><hash type='sha256' by='me'>"""
        + b"A" * 64
        + b"""</hash><x-sig/></hashes>
      <sources priority='1'><uri weight='2'>http://example.org/a</uri><x-mirror/></sources>
      <x-license>cc-by</x-license>
    </requires-file>
  </content-item>
</content-set></subscription_update>"""
    )
    written = to_xml(original)
    again = parse(written)
    assert again == original
    root = again.root
    assert root.extras.attributes == {("", "{urn:x}flag"): "1", ("", "colour"): "red"}
    assert root.constraints.extras.attributes == {
        ("constraints", "note"): "c",
        ("scheduling-constraints", "level"): "s",
        ("playback", "future"): "yes",
        ("time", "w"): "1",
        ("time/between[0]", "why"): "open",
        ("priority", "source"): "cms",
        ("preferred-duration", "unit"): "s",
    }
    assert root.constraints.extras.elements == {
        "time": ["<x-hint/>"],
        "priority": ["<x-why>launch</x-why>"],
        "scheduling-constraints": ["<x-weather>sunny</x-weather>"],
        "constraints": ["<x-other/>"],
    }
    first = root.children[0]
    assert isinstance(first, ContentItem)
    assert first.files[0].extras.attributes == {
        ("requires-file", "cache"): "no",
        ("hashes", "algo"): "x",
        ("hashes/hash[0]", "by"): "me",
        ("sources", "priority"): "1",
        ("sources/uri[0]", "weight"): "2",
    }
    assert again.wrapper_uri == "http://s.example/schedule/1/"
    assert schema().validate(etree.fromstring(written))


# ----------------------------------------------------------------------------- generated

_TEXT = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="\ufffe\uffff"
    ),
    max_size=12,
)
_TRIMMED = _TEXT.map(str.strip)
_UNKNOWN_NAME = st.sampled_from(["x-a", "x-note", "x-weather", "data-id", "x-b2"])


@st.composite
def unknown_element(draw: st.DrawFn) -> str:
    element = etree.Element(draw(_UNKNOWN_NAME))
    for name, value in draw(st.dictionaries(_UNKNOWN_NAME, _TEXT, max_size=2)).items():
        element.set(name, value)
    text = draw(_TEXT)
    element.text = text if text.strip() else None
    for _ in range(draw(st.integers(0, 2))):
        child = etree.SubElement(element, draw(_UNKNOWN_NAME))
        child_text = draw(_TEXT)
        child.text = child_text if child_text.strip() else None
    return canonical_xml(element)


_ATTRIBUTE_DRAWS = st.lists(st.tuples(st.integers(0, 63), _UNKNOWN_NAME, _TEXT), max_size=3)
_ELEMENT_DRAWS = st.lists(
    st.tuples(st.integers(0, 63), st.lists(unknown_element(), min_size=1, max_size=2)), max_size=2
)


def draw_extras(draw: st.DrawFn, paths: list[str], element_paths: list[str]) -> Extras:
    """Unknown attributes at ``paths`` and unknown elements at ``element_paths``.

    Module-level strategies indexed into the path lists: building strategies per draw is
    what makes generation slow."""
    found = Extras()
    for index, name, value in draw(_ATTRIBUTE_DRAWS):
        found.add_attribute(paths[index % len(paths)], name, value)
    if element_paths:
        for index, xmls in draw(_ELEMENT_DRAWS):
            for xml in xmls:
                found.add_element(element_paths[index % len(element_paths)], xml)
    return found


_CLOCK = st.times().map(lambda t: t.replace(microsecond=0))
_DURATION = st.one_of(
    st.integers(1, 100_000).map(float),
    st.floats(min_value=0.001, max_value=366 * 86400.0, allow_nan=False),
)
_DATES = (
    st.tuples(st.dates(), st.dates()).map(sorted).map(lambda pair: DateWindow(pair[0], pair[1]))
)
_URI = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}/{path}",
    st.sampled_from(["http", "https", "file"]),
    st.sampled_from(["", "example.org", "127.0.0.1:8080", "cdn.example.net"]),
    st.text(alphabet="abcXYZ019._~/%-", max_size=12),
).filter(lambda uri: not uri.startswith("http:///") and not uri.startswith("https:///"))


@st.composite
def constraints(draw: st.DrawFn) -> Constraints:
    result = Constraints(
        order=draw(st.none() | st.sampled_from(["inorder", "reverseorder", "random"])),
        avoid_context_switch=draw(st.none() | st.booleans()),
        times=draw(st.lists(st.builds(TimeWindow, _CLOCK, _CLOCK), max_size=3)),
        days=draw(st.lists(st.builds(DayWindow, st.integers(0, 6), st.integers(0, 6)), max_size=2)),
        dates=draw(st.lists(_DATES, max_size=2)),
        priority=draw(st.none() | st.integers(0, 4)),
        preferred_duration=draw(st.none() | _DURATION),
    )
    # Unknowns only where the element they sit on exists (or, for playback, can be made).
    attribute_paths = ["constraints", "scheduling-constraints", "playback"]
    element_paths = ["constraints", "scheduling-constraints", "playback"]
    for kind, windows in (
        ("time", result.times),
        ("day-of-week", result.days),
        ("date", result.dates),
    ):
        if windows:
            attribute_paths.append(kind)
            element_paths.append(kind)
            attribute_paths.extend(f"{kind}/between[{i}]" for i in range(len(windows)))
            element_paths.extend(f"{kind}/between[{i}]" for i in range(len(windows)))
    if result.priority is not None:
        attribute_paths.append("priority")
        element_paths.append("priority")
    if result.preferred_duration is not None:
        attribute_paths.append("preferred-duration")
    if draw(st.booleans()):
        result.extras = draw_extras(draw, attribute_paths, element_paths)
    return result


# A content item's address is http or https; a remote set's CDS may also come from a file.
_ITEM_URI = _URI.filter(lambda uri: not uri.startswith("file:"))


@st.composite
def required_file(draw: st.DrawFn, uris: st.SearchStrategy[str] = _URI) -> RequiredFile:
    hashes = [
        Hash(
            kind,
            draw(st.binary(min_size=HASH_TYPES[kind] // 2, max_size=HASH_TYPES[kind] // 2)).hex(),
        )
        for kind in draw(st.lists(st.sampled_from(sorted(HASH_TYPES)), max_size=2))
    ]
    sources = draw(st.lists(st.builds(Source, uris, st.none() | _DURATION), min_size=1, max_size=3))
    paths = ["requires-file", "hashes", "sources"]
    paths += [f"hashes/hash[{i}]" for i in range(len(hashes))]
    paths += [f"sources/uri[{i}]" for i in range(len(sources))]
    found = RequiredFile(sources=sources, hashes=hashes)
    if draw(st.booleans()):
        found.extras = draw_extras(draw, paths, ["requires-file", "hashes", "sources"])
    return found


CONSTRAINTS = constraints()
REQUIRED_FILE = required_file()
ITEM_FILE = required_file(_ITEM_URI)


@st.composite
def content_item(draw: st.DrawFn) -> ContentItem:
    return ContentItem(
        files=draw(st.lists(ITEM_FILE, min_size=1, max_size=2)),
        content_type=draw(st.none() | _TRIMMED),
        size=draw(st.none() | st.integers(0, 2**40)),
        constraints=draw(CONSTRAINTS),
        extras=draw_extras(draw, [""], [""]) if draw(st.booleans()) else Extras(),
    )


CONTENT_ITEM = content_item()
_AUTH = st.none() | unknown_element().map(lambda xml: "<auth>" + xml + "</auth>")
_FEEDBACK = st.none() | st.just("<feedback><x-to>ops</x-to></feedback>")


def content_set_of(children: st.SearchStrategy[list[Node]]) -> st.SearchStrategy[ContentSet]:
    @st.composite
    def build(draw: st.DrawFn) -> ContentSet:
        found = ContentSet(
            name=draw(st.none() | _TEXT),
            constraints=draw(CONSTRAINTS),
            auth=draw(_AUTH),
            feedback=draw(_FEEDBACK),
            extras=draw_extras(draw, [""], [""]) if draw(st.booleans()) else Extras(),
        )
        if draw(st.integers(0, 4)) == 0:
            found.type = "remote"
            found.requires_file = draw(REQUIRED_FILE)
        else:
            found.children = draw(children)
        return found

    return build()


_ITEMS: st.SearchStrategy[list[Node]] = st.lists(CONTENT_ITEM, max_size=3)
SET_0 = content_set_of(_ITEMS)
SET_1 = content_set_of(st.lists(CONTENT_ITEM | SET_0, max_size=2))
SET_2 = content_set_of(st.lists(CONTENT_ITEM | SET_1, max_size=2))


documents = st.builds(Document, root=SET_2, wrapper_uri=st.none() | _URI)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_models_round_trip(document: Document) -> None:
    written = to_xml(document)
    assert parse(written) == document
    assert schema().validate(etree.fromstring(written)), schema().error_log


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SET_1)
def test_bare_content_set_round_trip(root: ContentSet) -> None:
    assert parse(to_xml(root, indent=False)).root == root


def test_empty_constraints_are_not_written() -> None:
    written = to_xml(ContentSet(name="a"))
    assert b"constraints" not in written
    assert parse(written).root == ContentSet(name="a")


def test_written_values_use_the_spec_forms() -> None:
    root = ContentSet(
        name="a",
        constraints=Constraints(
            times=[TimeWindow(datetime.time(9), datetime.time(17, 30, 15))],
            days=[DayWindow(4, 0)],
            priority=4,
            preferred_duration=90.0,
        ),
    )
    written = to_xml(root).decode()
    assert '<between start="09:00:00" end="17:30:15"/>' in written
    assert '<between start="friday" end="monday"/>' in written
    assert '<priority level="highest"/>' in written
    assert "<preferred-duration>90 seconds</preferred-duration>" in written
