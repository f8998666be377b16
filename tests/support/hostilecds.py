"""Hostile CDS documents: what the parser must refuse, and refuse quickly. Shared by the
parser's tests (refused, only ever with CdsError) and bench_cds (how fast)."""

from __future__ import annotations

from cds.guard import MAX_BYTES, MAX_DEPTH

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<content-set name="&lol9;"/>"""

XXE = b"""<?xml version="1.0"?>
<!DOCTYPE cds [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<content-set name="x"><content-item><requires-file><sources>
<uri>http://x/&secret;</uri></sources></requires-file></content-item></content-set>"""

EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE content-set SYSTEM "http://127.0.0.1:9/cds.dtd">
<content-set name="x"/>"""

PARAMETER_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY % remote SYSTEM "http://127.0.0.1:9/x.dtd"> %remote;]>
<content-set name="x"/>"""

# The declaration is further down than any quick look would check, and mixed case.
LATE_DOCTYPE = b"<?xml version='1.0'?>\n\n\n" + b" " * 5000 + b"<!doctype x []><content-set/>"


def _declared(document: bytes, encoding: str) -> bytes:
    """The document in another encoding, saying so in its XML declaration."""
    text = document.decode().replace(
        '<?xml version="1.0"?>', f'<?xml version="1.0" encoding="{encoding.upper()}"?>'
    )
    return text.encode(encoding)


def hostile_documents() -> list[tuple[str, bytes]]:
    """(name, bytes) of documents a parser must refuse quickly: entity expansion, external
    entities and DTDs in several encodings, depth, width and size floods."""
    deep = b"<content-set>" * 10_000 + b"</content-set>" * 10_000
    nested_sets = b"<content-set>" * (MAX_DEPTH + 1) + b"</content-set>" * (MAX_DEPTH + 1)
    flood = b"<content-set>" + b"<x/>" * 1_000_000 + b"</content-set>"
    huge = b"<content-set name='" + b"a" * (MAX_BYTES + 10) + b"'/>"
    return [
        ("billion-laughs", BILLION_LAUGHS),
        ("billion-laughs-utf16", BILLION_LAUGHS.decode().encode("utf-16")),
        ("billion-laughs-utf32", _declared(BILLION_LAUGHS, "utf-32")),
        ("xxe-utf16be", _declared(XXE, "utf-16-be")),
        ("xxe", XXE),
        ("external-dtd", EXTERNAL_DTD),
        ("parameter-entity", PARAMETER_ENTITY),
        ("late-doctype", LATE_DOCTYPE),
        ("deep-10000", deep),
        ("deep-65", nested_sets),
        ("element-flood", flood),
        ("huge", huge),
        ("wide-set", b"<content-set>" + b'<content-set name="x"/>' * 5001 + b"</content-set>"),
        (
            "wide-sources",
            b"<content-set><content-item><requires-file><sources>"
            + b"<uri>http://x/</uri>" * 65
            + b"</sources></requires-file></content-item></content-set>",
        ),
        (
            "attribute-flood",
            b"<content-set " + b" ".join(b'a%d="1"' % i for i in range(5000)) + b"/>",
        ),
        (
            "unknown-flood",
            b"<content-set>" + (b"<x-a>" + b"<b/>" * 4000 + b"</x-a>") * 20 + b"</content-set>",
        ),
    ]
