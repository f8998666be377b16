"""The RELAX NG check: the schema in ``cds/schema/cds.rng``, with verdicts in people's words.

The schema stays the definition of the grammar; the parser asks for its verdict once its own
walk found nothing, so a gap in either shows up. libxml2's messages are reworded here for a
person scheduling a screen, and the echoes it adds for every enclosing element are dropped.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from lxml import etree

from cds.elements import line_of
from cds.errors import Problem
from cds.guard import xml_parser

__all__ = ["schema", "schema_problems"]


@cache
def schema() -> etree.RelaxNG:
    """The CDS grammar (``cds/schema/cds.rng``), loaded once."""
    text = resources.files("cds").joinpath("schema/cds.rng").read_bytes()
    return etree.RelaxNG(etree.fromstring(text, xml_parser()))


def schema_problems(root: etree._Element) -> list[Problem]:
    """What the RELAX NG schema finds wrong with a parsed document, in people's words."""
    validator = schema()
    if validator.validate(root):
        return []
    found: list[Problem] = []
    for entry in validator.error_log:
        line = entry.line if entry.line > 0 else None
        problem = Problem(line, None, _schema_message(entry.message))
        if problem not in found:
            found.append(problem)
    # libxml2 reports the first real fault, then every enclosing element as failing too;
    # those echoes help nobody. Keep them only when there is nothing better.
    specific = [p for p in found if not any(echo in p.message for echo in _SCHEMA_ECHOES)]
    if specific:
        return specific
    if found:
        return found[:1]
    return [Problem(line_of(root), None, "the document does not follow the CDS grammar")]


_SCHEMA_ECHOES = ("holds something not allowed", "in interleave")


_SCHEMA_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Element (\S+) has extra content: (\S+)"),
        "<{1}> is not allowed inside <{0}> here",
    ),
    (re.compile(r"Expecting an element (\S+), got nothing"), "a <{0}> element is missing here"),
    (re.compile(r"Expecting element (\S+), got (\S+)"), "expected <{0}> here, found <{1}>"),
    (re.compile(r"Did not expect element (\S+) there"), "<{0}> is not allowed here"),
    (
        re.compile(r"Invalid attribute (\S+) for element (\S+)"),
        "<{1}> has an attribute {0} that is not allowed or has a wrong value",
    ),
    (
        re.compile(r"Element (\S+) failed to validate attributes"),
        "<{0}> has an attribute that is missing, not allowed or has a wrong value",
    ),
    (re.compile(r"Type (\S+) doesn't allow value '(.*)'"), "the value '{1}' is not allowed here"),
    (re.compile(r"Datatype element (\S+) has child elements"), "<{0}> must hold only text"),
    (re.compile(r"Element (\S+) failed to validate content"), "<{0}> holds something not allowed"),
)


def _schema_message(message: str) -> str:
    for pattern, template in _SCHEMA_MESSAGES:
        found = pattern.search(message)
        if found:
            return template.format(*found.groups())
    return f"the document does not follow the CDS grammar ({message.strip()})"
