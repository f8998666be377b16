"""bench_stage's table: each figure of the stage beside the bare Qt Quick scene's, their
ratio, the target and whether the stage meets it; printed, and kept as data for the JSON."""

from __future__ import annotations

import argparse
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROTATED_RATIO_TARGET = 1.25
FADE_STEPS_TARGET = 12
FADE_SHORT_TARGET = 2  # steps the stage's fade may show fewer than the bare scene's
STILL_TARGET = 1.0  # % of a core for a still picture
PSS_RATIO_TARGET = 1.25
FIRST_PIXEL_P95_TARGET_MS = 300.0


def dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def ratio(top: Any, bottom: Any) -> float | None:
    if not isinstance(top, int | float) or not isinstance(bottom, int | float):
        return None
    if top <= 0 or bottom <= 0:  # a ratio of a figure at or below nothing means nothing
        return None
    return round(float(top) / float(bottom), 3)


CHECKS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
}


@dataclass(frozen=True)
class Row:
    label: str
    path: tuple[str, ...]  # into one stage's results
    digits: int
    target: tuple[str, float] | None = None  # (one of CHECKS, the value)

    def passes(self, value: Any) -> bool | None:
        if self.target is None or not isinstance(value, int | float):
            return None
        return CHECKS[self.target[0]](float(value), self.target[1])


def derive(
    found: dict[str, Any], floor: dict[str, Any] | None, bare_fade: Any = None
) -> dict[str, Any]:
    """The figures made of two others: rotated over unrotated, PSS over the floor, how many
    steps the fade shows fewer than the bare scene's (``bare_fade``), and a still picture's
    CPU in % of a core."""
    per_change = ("cpu", "page", "cpu_s_per_change")
    derived: dict[str, Any] = {
        "rotated_ratio": ratio(dig(found, "r90", *per_change), dig(found, "r0", *per_change)),
        "pss_ratio": ratio(dig(found, "play", "memory", "pss_mb"), dig(floor, "pss_mb")),
    }
    for rotation in (0, 90):
        steps = dig(found, f"r{rotation}", "fade", "median_steps")
        short = None
        if isinstance(steps, int | float) and isinstance(bare_fade, int | float):
            short = bare_fade - steps
        derived[f"fade_short_r{rotation}"] = short
        still = dig(found, f"r{rotation}", "cpu", "still", "cpu_s_per_s")
        derived[f"still_percent_r{rotation}"] = (
            round(still * 100, 2) if isinstance(still, int | float) else None
        )
    return {**found, "derived": derived}


def bare_column(results: dict[str, Any]) -> dict[str, Any]:
    """The baseline's figures where the stage's stand: its own sessions, the bare fade
    (fade_ceiling, unrotated, for both rotations) and the bare-view floor's PSS."""
    bare: dict[str, Any] = {key: dict(value) for key, value in results["bare"].items()}
    pictures = dig(results, "fade_ceiling", "pictures", "median_steps")
    for rotation in results["rotations"]:
        bare.setdefault(f"r{rotation}", {})["fade"] = {"median_steps": pictures}
    if dig(results, "floor", "pss_mb") is not None:
        bare.setdefault("play", {})["memory"] = {"pss_mb": results["floor"]["pss_mb"]}
    return bare


def table_rows(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    for rotation in (0, 90):
        turn, cpu = f"{rotation}°", (f"r{rotation}", "cpu")
        rows += [
            Row(
                f"still picture, % of a core, {turn}",
                ("derived", f"still_percent_r{rotation}"),
                2,
                ("<", STILL_TARGET),
            ),
            Row(
                f"still picture, wake-ups/s, {turn}", (*cpu, "still", "wakeups", "wakeups_per_s"), 1
            ),
            Row(f"signage page, CPU s/s, {turn}", (*cpu, "page", "cpu_s_per_s"), 3),
            Row(f"CPU s per page change, {turn}", (*cpu, "page", "cpu_s_per_change"), 3),
            Row(f"animated page (60 fps), CPU s/s, {turn}", (*cpu, "animated", "cpu_s_per_s"), 3),
            Row(f"  Xvfb: still CPU s/s, {turn}", (*cpu, "still", "xvfb_cpu_s_per_s"), 3),
            Row(f"  Xvfb: page CPU s/s, {turn}", (*cpu, "page", "xvfb_cpu_s_per_s"), 3),
            Row(f"  Xvfb: CPU s per change, {turn}", (*cpu, "page", "xvfb_cpu_s_per_change"), 3),
            Row(f"  Xvfb: animated CPU s/s, {turn}", (*cpu, "animated", "xvfb_cpu_s_per_s"), 3),
        ]
    latency = ("play", "latency")
    return [
        *rows,
        Row("CPU per change, rotated / unrotated", ("derived", "rotated_ratio"), 2,
            ("<", ROTATED_RATIO_TARGET)),
        Row("fade steps (median), 0°", ("r0", "fade", "median_steps"), 0,
            (">=", FADE_STEPS_TARGET)),
        Row("fade steps (median), 90°", ("r90", "fade", "median_steps"), 0,
            (">=", FADE_STEPS_TARGET)),
        Row("fade steps short of the bare scene's, 0°", ("derived", "fade_short_r0"), 1,
            ("<=", FADE_SHORT_TARGET)),
        Row("fade steps short of the bare scene's, 90°", ("derived", "fade_short_r90"), 1,
            ("<=", FADE_SHORT_TARGET)),
        Row(f"PSS MB after {args.transitions} transitions (bare: floor)",
            ("play", "memory", "pss_mb"), 0),
        Row("PSS / floor", ("derived", "pss_ratio"), 2, ("<=", PSS_RATIO_TARGET)),
        Row("schedule to first pixel p50 ms", (*latency, "first_pixel_p50_ms"), 0),
        Row("schedule to first pixel p95 ms", (*latency, "first_pixel_p95_ms"), 0,
            ("<", FIRST_PIXEL_P95_TARGET_MS)),
        Row("schedule to item in full p50 ms", (*latency, "full_p50_ms"), 0),
        Row("schedule to item in full p95 ms", (*latency, "full_p95_ms"), 0),
        Row("blank frames (memory, latency parts)", ("play", "blank", "blank_frames"), 0,
            ("==", 0)),
    ]  # fmt: skip


def table(args: argparse.Namespace, results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows as data (for the JSON), and printed: the stage, the bare scene, the stage's
    figure over the bare one, the target, and pass or fail (the stage's)."""
    floor = results.get("floor")
    stages = {
        "stage": derive(
            results["stage"], floor, dig(results, "fade_ceiling", "pictures", "median_steps")
        ),
        "bare": derive(bare_column(results), None),
    }
    out: list[dict[str, Any]] = []
    print(f"\n{'':<40}{'stage':>10}{'bare':>10}{'stage/bare':>11}  {'target':<8} pass")
    for row in table_rows(args):
        values = {name: dig(found, *row.path) for name, found in stages.items()}
        if all(value is None for value in values.values()):
            continue
        cells = ["-" if v is None else f"{v:.{row.digits}f}" for v in values.values()]
        passes = row.passes(values["stage"])
        target = "" if row.target is None else f"{row.target[0]} {row.target[1]:g}"
        against = ratio(values["stage"], values["bare"])
        verdict = "-" if passes is None else "PASS" if passes else "FAIL"
        print(
            f"{row.label:<40}"
            + "".join(f"{cell:>10}" for cell in cells)
            + f"{'' if against is None else f'{against:.2f}x':>11}  {target:<8} "
            + (verdict if row.target else "")
        )
        out.append(
            {
                "metric": row.label,
                "values": values,
                "stage_over_bare": against,
                "target": target or None,
                "pass": passes,
            }
        )
    return out
