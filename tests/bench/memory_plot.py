"""The memory benchmark's plot, drawn with Qt (QImage + QPainter): the display's own dependency,
so the benchmark needs no plotting library.

One colour per run (profile, and per results file when several are drawn: e.g. an older
checkout beside this one): PSS a solid line with dots, RSS a dashed line; the floor (one bare
view) grey dotted lines, PSS and RSS; each profile's PSS target (floor times its ratio) a thin
dash-dot line in the profile's colour.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1600, 900
LEFT, RIGHT, TOP, BOTTOM = 110, 360, 90, 90
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
TARGETS = {"default": 1.25, "low-memory": 1.1}


def nice_step(span: float, ticks: int) -> float:
    """A round step (1, 2, 5 times a power of ten) giving about ``ticks`` ticks over ``span``."""
    raw = span / max(1, ticks)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def plot(results: list[dict[str, Any]], target: Path) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QPen

    _app = QGuiApplication.instance() or QGuiApplication(["bench-memory-plot"])
    runs = [
        (f"{run['profile']} @ {result['commit']}", run, result)
        for result in results
        for run in result["runs"]
        if run.get("points")
    ]
    if not runs:
        raise SystemExit("nothing to plot")
    floors_pss = [run["floor"]["pss_mb"] for _, run, _ in runs]
    floors_rss = [run["floor"]["rss_mb"] for _, run, _ in runs]
    floor_pss, floor_rss = statistics.median(floors_pss), statistics.median(floors_rss)
    values = [v for _, run, _ in runs for p in run["points"] for v in (p["pss_mb"], p["rss_mb"])]
    values += [floor_pss, floor_rss]
    low, high = min(values), max(values)
    step = nice_step(high - low, 8)
    y_min = math.floor((low - (high - low) * 0.05) / step) * step
    y_max = math.ceil((high + (high - low) * 0.05) / step) * step
    x_max = max(p["transitions"] for _, run, _ in runs for p in run["points"])
    x_step = nice_step(x_max, 10)
    x_max = math.ceil(x_max / x_step) * x_step

    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def at(x: float, y: float) -> QPointF:
        return QPointF(LEFT + x / x_max * plot_w, TOP + (y_max - y) / (y_max - y_min) * plot_h)

    image = QImage(WIDTH, HEIGHT, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    font = QFont("DejaVu Sans")

    def text(
        x: float,
        y: float,
        words: str,
        size: int,
        flags: Any,
        bold: bool = False,
        colour: str = "#222222",
        width: float = 400,
    ) -> None:
        font.setPixelSize(size)
        font.setBold(bold)
        painter.setFont(font)
        painter.setPen(QColor(colour))
        if flags & Qt.AlignmentFlag.AlignRight:
            box = QRectF(x - width, y - size, width, size * 2)
        elif flags & Qt.AlignmentFlag.AlignHCenter:
            box = QRectF(x - width / 2, y - size, width, size * 2)
        else:
            box = QRectF(x, y - size, width, size * 2)
        painter.drawText(box, flags | Qt.AlignmentFlag.AlignVCenter, words)

    first = results[0]
    text(
        LEFT,
        30,
        "Memory of the display's whole process tree over transitions",
        26,
        Qt.AlignmentFlag.AlignLeft,
        bold=True,
        width=1400,
    )
    text(
        LEFT,
        62,
        f"pdn display at {first['size']} on Xvfb; items of {first['item_seconds']:g} s "
        "(pages 60%, cached images 20%, WebM videos 20%); each point the median of "
        f"{len(runs[0][1]['points'][0]['readings_pss_mb'])} readings; load average "
        f"{first.get('load_average_start', ['?'])[0]} at the start",
        16,
        Qt.AlignmentFlag.AlignLeft,
        colour="#555555",
        width=1400,
    )

    # Grid, ticks and labels.
    painter.setPen(QPen(QColor("#e4e4e4"), 1))
    y = y_min
    while y <= y_max + 1e-9:
        painter.setPen(QPen(QColor("#e4e4e4"), 1))
        painter.drawLine(at(0, y), at(x_max, y))
        text(LEFT - 10, at(0, y).y(), f"{y:.0f}", 16, Qt.AlignmentFlag.AlignRight, width=90)
        y += step
    x = 0.0
    while x <= x_max + 1e-9:
        painter.setPen(QPen(QColor("#e4e4e4"), 1))
        painter.drawLine(at(x, y_min), at(x, y_max))
        text(
            at(x, 0).x(),
            TOP + plot_h + 20,
            f"{x:.0f}",
            16,
            Qt.AlignmentFlag.AlignHCenter,
            width=100,
        )
        x += x_step
    painter.setPen(QPen(QColor("#333333"), 2))
    painter.drawRect(QRectF(LEFT, TOP, plot_w, plot_h))
    text(LEFT + plot_w / 2, HEIGHT - 30, "transitions", 18, Qt.AlignmentFlag.AlignHCenter)
    painter.save()
    painter.translate(30, TOP + plot_h / 2)
    painter.rotate(-90)
    text(0, 0, "MB (PSS solid, RSS dashed)", 18, Qt.AlignmentFlag.AlignHCenter, width=500)
    painter.restore()

    # The floor and the targets.
    for value, name in ((floor_pss, "PSS"), (floor_rss, "RSS")):
        painter.setPen(QPen(QColor("#777777"), 2, Qt.PenStyle.DotLine))
        painter.drawLine(at(0, value), at(x_max, value))
        text(
            LEFT + plot_w - 8,
            at(0, value).y() - 12,
            f"floor {name} {value:.0f} MB",
            15,
            Qt.AlignmentFlag.AlignRight,
            colour="#555555",
        )
    # (words, colour, line style or None for a heading, line width)
    legend: list[tuple[str, str, Qt.PenStyle | None, float]] = []
    drawn_targets: set[str] = set()
    for index, (_, run, result) in enumerate(runs):
        colour = QColor(COLOURS[index % len(COLOURS)])
        ratio = TARGETS.get(run["profile"])
        if ratio is not None and run["profile"] not in drawn_targets and index < 2:
            drawn_targets.add(run["profile"])
            painter.setPen(QPen(colour, 1.5, Qt.PenStyle.DashDotLine))
            painter.drawLine(at(0, floor_pss * ratio), at(x_max, floor_pss * ratio))
            text(
                LEFT + 8,
                at(0, floor_pss * ratio).y() - 12,
                f"target {run['profile']}: {ratio}x floor PSS",
                15,
                Qt.AlignmentFlag.AlignLeft,
                colour=colour.name(),
            )
        points = run["points"]
        for key, style, width in (
            ("rss_mb", Qt.PenStyle.DashLine, 2.0),
            ("pss_mb", Qt.PenStyle.SolidLine, 3.0),
        ):
            painter.setPen(QPen(colour, width, style))
            for a, b in itertools.pairwise(points):
                painter.drawLine(at(a["transitions"], a[key]), at(b["transitions"], b[key]))
        painter.setPen(QPen(colour, 1))
        painter.setBrush(colour)
        for point in points:
            painter.drawEllipse(at(point["transitions"], point["pss_mb"]), 3.5, 3.5)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        found = run.get("figures", {})
        legend.append((run["profile"], colour.name(), None, 0))
        commit = str(result["commit"]).replace("+uncommitted", " + uncommitted changes")
        legend.append((f"at {commit}", "", Qt.PenStyle.NoPen, 0))
        legend.append(("PSS", colour.name(), Qt.PenStyle.SolidLine, 3.0))
        legend.append(("RSS", colour.name(), Qt.PenStyle.DashLine, 2.0))
        if found:
            legend.append(
                (
                    f"steady {found['steady_pss_mb']:.0f} MB = "
                    f"{found['pss_ratio_to_floor']:.2f}x floor",
                    "",
                    Qt.PenStyle.NoPen,
                    0,
                )
            )
            legend.append(
                (
                    f"growth {found['growth_pss_mb']:+.1f} MB, "
                    f"blank frames {run['blank']['blank_frames']}",
                    "",
                    Qt.PenStyle.NoPen,
                    0,
                )
            )
    legend.append(("", "", None, 0))
    legend.append(("floor: one bare view, same run", "#777777", Qt.PenStyle.DotLine, 2.0))
    legend.append(("target: a ratio of floor PSS", "#777777", Qt.PenStyle.DashDotLine, 1.5))

    # The legend, right of the plot.
    y = TOP + 10
    for words, colour_name, line_style, width in legend:
        if line_style is None:  # a run's heading
            y += 8
            text(
                WIDTH - RIGHT + 20,
                y,
                words,
                16,
                Qt.AlignmentFlag.AlignLeft,
                bold=True,
                colour=colour_name,
                width=RIGHT - 25,
            )
        else:
            if line_style != Qt.PenStyle.NoPen:
                painter.setPen(QPen(QColor(colour_name), width, line_style))
                painter.drawLine(QPointF(WIDTH - RIGHT + 20, y), QPointF(WIDTH - RIGHT + 60, y))
            text(WIDTH - RIGHT + 70, y, words, 15, Qt.AlignmentFlag.AlignLeft, width=RIGHT - 75)
        y += 26
    painter.end()
    target.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(target)):
        raise SystemExit(f"could not write {target}")
