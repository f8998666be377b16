"""``[screen] wall``: this display is one tile of a video wall (no Qt).

``wall = {columns = 2, rows = 2, column = 0, row = 1, bezel = 0.02}``: the wall is
``columns`` x ``rows`` panels of this display's size; this display is the panel at ``column``,
``row`` (counted from 0, left to right and top to bottom, as the audience sees the wall). Every
item (a page, a picture, a video) is laid out at the wall's size and this display shows its
tile of it. ``bezel`` is the gap between two panels' pictures (their two bezels together) as a
fraction of a panel's width, the same number of pixels between rows (pixels are square), so a
line crossing the wall stays straight: what falls behind the bezels is not shown, as on a
window frame. The idle page and the idle cover stay this panel's own (an installer reads them).

The geometry is computed here and drawn by ``qml/Stage.qml`` with the same arithmetic.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MAX_PANELS", "Wall", "parse_wall"]

MAX_PANELS = 16  # per side
MAX_BEZEL = 0.5
_KEYS = ("columns", "rows", "column", "row", "bezel")


@dataclass(frozen=True)
class Wall:
    columns: int
    rows: int
    column: int
    row: int
    bezel: float = 0.0

    def gap(self, panel_width: float) -> float:
        """Pixels between two panels' pictures."""
        return self.bezel * panel_width

    def size(self, panel_width: float, panel_height: float) -> tuple[float, float]:
        """The wall's size in this panel's pixels, bezels included."""
        gap = self.gap(panel_width)
        return (
            self.columns * panel_width + (self.columns - 1) * gap,
            self.rows * panel_height + (self.rows - 1) * gap,
        )

    def origin(self, panel_width: float, panel_height: float) -> tuple[float, float]:
        """Where this panel's top left corner is on the wall."""
        gap = self.gap(panel_width)
        return (self.column * (panel_width + gap), self.row * (panel_height + gap))

    def describe(self) -> str:
        return (
            f"column {self.column} of {self.columns}, row {self.row} of {self.rows}"
            f"{f', bezel {self.bezel:g}' if self.bezel else ''} (counted from 0)"
        )


def _whole(name: str, value: object, low: int, high: int, what: str) -> tuple[int | None, str]:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None, f"'{name}' must be a whole number from {low} to {high}{what}"
    return value, ""


def parse_wall(key: str, table: Mapping[str, object]) -> tuple[Wall | None, list[str]]:
    """The wall of a ``[screen] wall`` table and every problem found in it (all at once)."""
    problems: list[str] = []
    given = {str(k).replace("_", "-"): v for k, v in table.items()}
    for name in given:
        if name not in _KEYS:
            close = difflib.get_close_matches(name, _KEYS, n=1, cutoff=0.6)
            known = f" (known: {', '.join(_KEYS)})"
            hint = f"; did you mean '{key}.{close[0]}'?" if close else known
            problems.append(f"unknown key '{key}.{name}'{hint}")
    values: dict[str, int] = {}
    for name in ("columns", "rows"):
        if name not in given:
            problems.append(f"'{key}.{name}' is required (the wall's panels across and down)")
            continue
        value, problem = _whole(f"{key}.{name}", given[name], 1, MAX_PANELS, "")
        if problem:
            problems.append(problem)
        elif value is not None:
            values[name] = value
    for name, count in (("column", "columns"), ("row", "rows")):
        if name not in given:
            problems.append(f"'{key}.{name}' is required (this display's place, from 0)")
            continue
        high = values.get(count, MAX_PANELS) - 1
        what = f" (the wall has {values[count]} {count}, counted from 0)" if count in values else ""
        value, problem = _whole(f"{key}.{name}", given[name], 0, high, what)
        if problem:
            problems.append(problem)
        elif value is not None:
            values[name] = value
    bezel = given.get("bezel", 0.0)
    if isinstance(bezel, bool) or not isinstance(bezel, int | float) or not 0 <= bezel <= MAX_BEZEL:
        problems.append(
            f"'{key}.bezel' must be a fraction of a panel's width from 0 to {MAX_BEZEL:g} "
            "(the gap between two panels' pictures, e.g. 0.02)"
        )
        bezel = 0.0
    if problems:
        return None, problems
    return (
        Wall(values["columns"], values["rows"], values["column"], values["row"], float(bezel)),
        [],
    )
