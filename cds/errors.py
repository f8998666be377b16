"""The one error type of the CDS library, and the problems it carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CdsError", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in a CDS document.

    ``line`` is the 1-based line in the document (None when the problem is not tied to a line,
    such as an unreadable file); ``element`` the element's name without brackets.
    """

    line: int | None
    element: str | None
    message: str

    def __str__(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"


class CdsError(Exception):
    """A CDS document that cannot be used; ``problems`` says every reason found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: list[Problem] = list(problems) or [
            Problem(None, None, "the document is not a valid CDS")
        ]
        super().__init__("; ".join(str(problem) for problem in self.problems))

    def __reduce__(self) -> tuple[type[CdsError], tuple[list[Problem]]]:
        return (CdsError, (self.problems,))
