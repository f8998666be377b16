"""The shipped RELAX NG schema: it is the grammar of docs/cds.md, it is what the parser validates
against, and its verdicts reach people as sentences with line numbers."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from lxml import etree

from cds.errors import CdsError
from cds.parser import parse
from cds.relaxng import schema, schema_problems

from .helpers import content_set, dates, days, duration, item, playback, priority, times

DATA = Path(__file__).parent / "data"


def test_schema_ships_in_the_package() -> None:
    shipped = resources.files("cds").joinpath("schema/cds.rng")
    assert shipped.is_file()
    tree = etree.fromstring(shipped.read_bytes())
    assert tree.tag == "{http://relaxng.org/ns/structure/1.0}grammar"
    assert isinstance(schema(), etree.RelaxNG)


VALID = [
    content_set("a", item("x")),
    '<content-set name="empty"/>',
    content_set(
        "all",
        item(
            "x",
            times(("09:00", "17:00:30")),
            days(("Fri", "MONDAY")),
            dates(("2026-01-01", "2026-12-31")),
        ),
        content_set(
            "inner",
            item("y", priority("3"), duration("PT30S")),
            constraints=(playback("Random", True),),
        ),
        constraints=(priority("HIGH"), playback(avoid=False)),
    ),
    '<subscription_update uri="http://x/"><content-set name="a" type="INLINE"/>'
    "</subscription_update>",
    '<content-set name="r" type="remote"><requires-file><sources><uri refresh="1 hour">'
    "https://x/r.xml</uri></sources></requires-file></content-set>",
    '<content-set x:a="1" xmlns:x="urn:x"><x:anything><content-item/></x:anything>'
    '<x-other y="2">text<b/></x-other><auth><anything-goes/></auth><feedback/></content-set>',
]


@pytest.mark.parametrize("text", VALID)
def test_schema_accepts_what_the_parser_accepts(text: str) -> None:
    parse(text)
    assert schema_problems(etree.fromstring(text)) == []


@pytest.mark.parametrize("path", sorted(DATA.glob("*.xml")), ids=lambda p: p.name)
def test_schema_accepts_the_example_files(path: Path) -> None:
    assert schema().validate(etree.parse(str(path)))


# Each of these is refused by the parser's own checks; the schema must refuse them too, so it
# is a faithful statement of the grammar (not a rubber stamp beside the code).
INVALID = {
    "misplaced constraint": '<content-set name="a">\n<time/>\n</content-set>',
    "item without file": '<content-set name="a">\n<content-item/>\n</content-set>',
    "time without between": content_set("a", item("x", "<time/>")),
    "bad clock": content_set("a", item("x", times(("9am", "10:00")))),
    "bad day": content_set("a", item("x", days(("funday", "mon")))),
    "bad date": content_set("a", item("x", dates(("24/12/2026", "2026-12-25")))),
    "bad priority": content_set("a", item("x", priority("urgent"))),
    "priority without level": content_set("a", item("x", "<priority/>")),
    "bad order": content_set("a", item("x", playback("shuffle"))),
    "legacy root": "<content-collection/>",
    "legacy play-on": content_set("a", item("x", "<time><play-on/></time>")),
    "legacy http-source": "<content-set><content-item><requires-file><http-source>http://x/"
    "</http-source></requires-file></content-item></content-set>",
    "stray text": "<content-set>hello</content-set>",
    "bad type": '<content-set name="a" type="sideways"/>',
    "bad size": '<content-set><content-item size="big"><requires-file><sources><uri>http://x/'
    "</uri></sources></requires-file></content-item></content-set>",
    "bad hash type": '<content-set><content-item><requires-file><hashes><hash type="crc">ab</hash>'
    "</hashes><sources><uri>http://x/</uri></sources></requires-file></content-item></content-set>",
    "empty sources": "<content-set><content-item><requires-file><sources/></requires-file>"
    "</content-item></content-set>",
    "two sources": "<content-set><content-item><requires-file><sources><uri>http://x/</uri>"
    "</sources><sources><uri>http://y/</uri></sources></requires-file></content-item></content-set>",
    "element in uri": "<content-set><content-item><requires-file><sources><uri>http://x/<b/></uri>"
    "</sources></requires-file></content-item></content-set>",
    "two roots in wrapper": '<subscription-update uri="x"><content-set/><content-set/>'
    "</subscription-update>",
    "item in wrapper": '<subscription-update uri="x"><content-item/><content-set/>'
    "</subscription-update>",
    "constraints twice": "<content-set><constraints/><constraints/></content-set>",
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_schema_refuses_what_the_parser_refuses(name: str) -> None:
    text = INVALID[name]
    with pytest.raises(CdsError):
        parse(text)
    found = schema_problems(etree.fromstring(text))
    assert found, f"the schema accepts {name!r}"
    assert all(p.message for p in found)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<content-set name="a">\n<time/>\n</content-set>',
            "line 2: <time> is not allowed inside <content-set> here",
        ),
        (
            '<content-set name="a" type="sideways"/>',
            "line 1: <content-set> has an attribute type",
        ),
        (
            "<content-set>\n<content-item>\n<requires-file><sources/></requires-file>\n"
            "</content-item></content-set>",
            "line 3: a <uri> element is missing here",
        ),
        ("<content-collection/>", "line 1: the document does not follow the CDS grammar"),
    ],
)
def test_schema_errors_read_as_sentences_with_lines(text: str, expected: str) -> None:
    found = [str(p) for p in schema_problems(etree.fromstring(text))]
    assert any(p.startswith(expected) for p in found), found
    assert not any("interleave" in p for p in found), found


def test_parser_uses_the_schema_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the walk finds nothing, a schema error still refuses the document."""
    strict = etree.RelaxNG(
        etree.fromstring(
            b'<element name="content-set" xmlns="http://relaxng.org/ns/structure/1.0">'
            b'<attribute name="name"><value>only-this</value></attribute></element>'
        )
    )
    import cds.relaxng

    monkeypatch.setattr(cds.relaxng, "schema", lambda: strict)
    assert parse('<content-set name="only-this"/>').root.name == "only-this"
    with pytest.raises(CdsError) as caught:
        parse('<content-set name="other"/>')
    assert caught.value.problems[0].line == 1
    assert "<content-set> has an attribute" in caught.value.problems[0].message
