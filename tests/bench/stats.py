"""Figures the benchmarks share."""

from __future__ import annotations


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0.5: the median) of the sorted values, nearest rank; NaN for
    none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]
