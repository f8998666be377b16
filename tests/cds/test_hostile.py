"""Hostile and random input: refused quickly, and only ever with CdsError.

How fast is measured in tests/bench/bench_cds.py; here a timeout only guards against
a document that makes the parser hang or expand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cds.errors import CdsError
from cds.parser import parse
from cds.serialise import to_xml
from tests.support.hostilecds import hostile_documents

from .helpers import content_set, item


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("name", "data"), hostile_documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_hostile_documents_are_refused(name: str, data: bytes) -> None:
    with pytest.raises(CdsError) as caught:
        parse(data)
    message = str(caught.value)
    expected = {
        "billion-laughs": "DOCTYPE",
        "billion-laughs-utf16": "DOCTYPE",
        "billion-laughs-utf32": "DOCTYPE",
        "xxe-utf16be": "DOCTYPE",
        "xxe": "DOCTYPE",
        "external-dtd": "DOCTYPE",
        "parameter-entity": "DOCTYPE",
        "late-doctype": "DOCTYPE",
        "deep-10000": "nested more than 64 levels",
        "deep-65": "nested more than 64 levels",
        "element-flood": "more than 100000 elements",
        "wide-set": "<content-set> holds more than 5000 elements; split it into several sets",
        "wide-sources": "<sources> holds more than 64 elements",
        "attribute-flood": "<content-set> has more than 64 attributes",
        "unknown-flood": "more than 2000 elements that are not part of the CDS grammar",
        "huge": "larger than 8 MiB",
    }[name]
    assert expected in message
    assert "root:" not in message  # nothing from /etc/passwd leaks into a message


def test_depth_limit_is_not_too_tight() -> None:
    """A legitimately nested schedule (20 sets deep, with items) is fine."""
    body = item("leaf")
    for level in range(20):
        body = content_set(f"level{level}", body, item(f"x{level}"))
    assert len(parse(body).root.walk_items()) == 21


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_only_raise_cds_error(data: bytes) -> None:
    try:
        parse(data)
    except CdsError as error:
        assert error.problems
        assert "could not be read (" not in str(error), "an unexpected exception inside"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=500))
def test_arbitrary_text_only_raises_cds_error(text: str) -> None:
    try:
        parse(text)
    except CdsError as error:
        assert error.problems
        assert "could not be read (" not in str(error), "an unexpected exception inside"


_PIECES = st.sampled_from(
    [
        "<content-set",
        "</content-set>",
        "<content-item>",
        "</content-item>",
        "<requires-file>",
        "</requires-file>",
        "<sources>",
        "</sources>",
        "<uri>",
        "</uri>",
        "http://x/a",
        "<constraints>",
        "</constraints>",
        "<scheduling-constraints>",
        "</scheduling-constraints>",
        "<time>",
        "</time>",
        '<between start="09:00" end="17:00"/>',
        '<between start="mon" end="fri"/>',
        '<between start="2026-01-01" end="2025-01-01"/>',
        "<day-of-week>",
        "</day-of-week>",
        "<date>",
        "</date>",
        '<priority level="high"/>',
        "<preferred-duration>3 s</preferred-duration>",
        '<playback order="random"/>',
        '<hashes><hash type="md5">00</hash></hashes>',
        ' name="a"',
        ' type="remote"',
        ">",
        "/>",
        "<x-foo/>",
        "&amp;",
        "&bogus;",
        "<![CDATA[x]]>",
        "<!-- c -->",
        "<?pi x?>",
        '<subscription-update uri="http://x/">',
        "</subscription-update>",
        "\n",
        " ",
        "\x00",
        "é",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_almost_cds_only_raises_cds_error(text: str) -> None:
    """Documents made of CDS pieces get further into the walk than random bytes do."""
    for data in (text, text.encode("utf-8", errors="surrogatepass")):
        try:
            parse(data)
        except CdsError as error:
            assert error.problems
            assert "could not be read (" not in str(error), "an unexpected exception inside"


_CAMPUS = (Path(__file__).parent / "data" / "campus.xml").read_text(encoding="utf-8")
_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "repeat", "insert"]),
        st.integers(0, len(_CAMPUS)),
        st.integers(1, 40),
        st.sampled_from(["<", ">", "/", '"', "'", " ", "x", "0", "-", "&", "é", "<x-a/>"]),
    ),
    min_size=1,
    max_size=4,
)


def _edit(text: str, edits: list[tuple[str, int, int, str]]) -> str:
    for operation, where, length, piece in edits:
        position = where % (len(text) + 1)
        if operation == "delete":
            text = text[:position] + text[position + length :]
        elif operation == "repeat":
            text = text[:position] + text[position : position + length] + text[position:]
        else:
            text = text[:position] + piece + text[position:]
    return text


@settings(max_examples=200, deadline=None)
@given(_EDITS)
def test_damaged_documents_are_refused_or_round_trip(
    edits: list[tuple[str, int, int, str]],
) -> None:
    """A real schedule with random damage: refused with CdsError, or (when the damage still
    leaves a valid CDS) read into a model that survives a round trip."""
    text = _edit(_CAMPUS, edits)
    try:
        document = parse(text)
    except CdsError as error:
        assert error.problems
        assert "could not be read (" not in str(error), "an unexpected exception inside"
        return
    assert parse(to_xml(document)) == document
