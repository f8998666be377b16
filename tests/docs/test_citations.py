"""Every page and section of ``docs/`` that the code cites exists.

Docstrings and comments point a reader to the page that explains a rule, as ``docs/cds.md,
"Files"`` or ``docs/interface.md ("Display Segment")``. A heading renamed or a page split would
leave such a pointer leading nowhere; this test reads every citation in the product, the schema
and the tests, and looks the section up among the page's headings.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("player", "server", "cds", "tests")
SUFFIXES = {".py", ".rng", ".sh", ".qml", ".js"}
# A citation: the page, then optionally its section in double quotes (after ", " or " (").
CITATION = re.compile(r'docs/([\w-]+\.md)(?:(?:,|:)? \(?"([^"]+)")?')
# A line break inside a docstring or comment, with what starts the next line.
BREAK = re.compile(r"\s*\n\s*(?:#:?|//|<!--)?\s*")


def citations(text: str) -> list[tuple[str, str | None]]:
    """The (page, section) pairs cited in ``text``, line breaks inside them undone."""
    joined = BREAK.sub(" ", text)
    return [(page, section or None) for page, section in CITATION.findall(joined)]


def headings(page: Path) -> set[str]:
    """The titles of the page's headings, outside fenced code."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#+ (.+?)\s*$", line)):
            found.add(match.group(1))
    return found


def broken(text: str, docs: Path) -> list[str]:
    """What ``text`` cites that ``docs`` does not have."""
    problems = []
    for page, section in citations(text):
        target = docs / page
        if not target.exists():
            problems.append(f"docs/{page}: no such page")
        elif section is not None and section not in headings(target):
            problems.append(f'docs/{page}, "{section}": no such heading')
    return problems


def test_every_cited_page_and_section_exists() -> None:
    found = 0
    problems = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file() or path == Path(__file__):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            found += len(citations(text))
            problems += [
                f"{path.relative_to(ROOT)}: {problem}" for problem in broken(text, ROOT / "docs")
            ]
    assert found >= 20, f"only {found} citations of docs/ found: is the pattern still right?"
    assert not problems, "\n".join(problems)


def test_a_citation_broken_over_lines_is_read_whole_and_checked(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text(
        "# Page\n\n## Who may change what\n\n```\n# Not a heading\n```\n"
    )
    good = '    # stays open (docs/page.md, "Who may change\n    # what"): rate-limited below.\n'
    assert citations(good) == [("page.md", "Who may change what")]
    assert broken(good, tmp_path) == []
    assert broken('"""See docs/page.md, "Not a heading"."""', tmp_path) == [
        'docs/page.md, "Not a heading": no such heading'
    ]
    assert broken("#: docs/gone.md", tmp_path) == ["docs/gone.md: no such page"]
