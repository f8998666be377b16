"""The spread of a fleet's clocks: how far apart the displays' clocks are, by what their time
daemons say (``/x/health``'s ``clock``, kept per display by the fleet status). Screens that
change together (a synchronised set, docs/cds.md) agree only as well as their clocks do.

No Flask, no requests: ``pdn ctl fleet`` prints it from ``GET /x/fleet``'s answer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["clock_spread", "describe_spread"]


def clock_spread(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the fleet's entries (``GET /x/fleet``): how far apart the displays' clocks are, by
    what their time daemons say (the largest offset minus the smallest), and how many could
    not say. Offline displays count as unknown."""
    offsets: list[float] = []
    unknown = unsynchronised = 0
    for entry in entries:
        clock = entry.get("clock") if entry.get("online") else None
        offset = clock.get("offset-ms") if isinstance(clock, dict) else None
        if isinstance(clock, dict) and clock.get("synchronised") is False:
            unsynchronised += 1
        if isinstance(offset, int | float):
            offsets.append(float(offset))
        else:
            unknown += 1
    return {
        "known": len(offsets),
        "unknown": unknown,
        "unsynchronised": unsynchronised,
        "min-ms": min(offsets) if offsets else None,
        "max-ms": max(offsets) if offsets else None,
        "spread-ms": round(max(offsets) - min(offsets), 3) if offsets else None,
    }


def describe_spread(spread: dict[str, Any]) -> str:
    """One line for people: the console's and ``pdn ctl fleet``'s."""
    if not spread["known"]:
        return f"clocks: no display reports its offset ({spread['unknown']} unknown)"
    text = (
        f"clocks: {spread['spread-ms']:g} ms apart over {spread['known']} displays "
        f"({spread['min-ms']:+g} to {spread['max-ms']:+g} ms from their time sources)"
    )
    if spread["unknown"]:
        text += f"; {spread['unknown']} unknown"
    if spread["unsynchronised"]:
        text += f"; {spread['unsynchronised']} not synchronised"
    return text
