"""``<playback transition="crossfade|cut">``: read (any case), kept when written out, named in
the refusal of any other value, and known to the RELAX NG schema."""

from __future__ import annotations

import pytest
from lxml import etree

from cds.errors import CdsError
from cds.model import ContentItem
from cds.parser import parse
from cds.relaxng import schema_problems
from cds.serialise import to_xml

from .helpers import at, content_set, doc, everything, item, name_of, playlist


def document(playback: str) -> bytes:
    return (
        '<content-set name="a"><content-item content-type="text/html"><constraints>'
        f"<scheduling-constraints>{playback}</scheduling-constraints></constraints>"
        "<requires-file><sources><uri>https://example.org/</uri></sources></requires-file>"
        "</content-item></content-set>"
    ).encode()


@pytest.mark.parametrize(("given", "read"), [("cut", "cut"), ("CrossFade", "crossfade")])
def test_a_transition_is_read_and_written_back(given: str, read: str) -> None:
    parsed = parse(document(f'<playback order="inorder" transition="{given}"/>'))
    assert parsed.warnings == []
    (item,) = parsed.root.children
    assert isinstance(item, ContentItem) and item.constraints.transition == read
    written = to_xml(parsed)
    assert f'transition="{read}"'.encode() in written
    again = parse(written).root.children[0]
    assert isinstance(again, ContentItem) and again.constraints.transition == read
    assert schema_problems(etree.fromstring(written)) == []


def test_another_transition_is_refused_with_its_line() -> None:
    with pytest.raises(CdsError) as refused:
        parse(document('<playback transition="wipe"/>'))
    (problem,) = refused.value.problems
    assert (
        problem.line == 1 and "transition must be crossfade or cut, got 'wipe'" in problem.message
    )
    assert schema_problems(etree.fromstring(document('<playback transition="wipe"/>')))


def test_the_nearest_transition_is_the_selections() -> None:
    """An item's own transition wins over its set's; without either, a cross-fade."""
    root = doc(
        "top",
        content_set(
            "cuts",
            item("a"),
            item("b", '<playback transition="crossfade"/>'),
            constraints=('<playback transition="cut"/>',),
        ),
        content_set("plain", item("c")),
    )
    p = playlist(root)
    seen = {name_of(v.item): v.transition for v in p.eligible(at("2026-11-23 10:00"), everything)}
    assert seen == {"a": "cut", "b": "crossfade", "c": "crossfade"}
