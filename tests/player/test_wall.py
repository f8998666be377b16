"""A 2x2 video wall of four kiosk renderers on Xvfb ([screen] wall, player/wall.py): a picture
and a page laid out at the wall's size, each renderer showing its tile of it, the bezels'
pixels left out; the idle page this panel's own. Read back from the X server (the root window
under each renderer's window), not from Qt's own grab."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QGuiApplication, QImage

from cds.layouts import zone_boxes
from cds.model import Layout, Zone
from player.playitem import PlayItem
from player.renderer import KioskRenderer
from player.wall import Wall
from tests.player.conftest import COLOURS, LoopbackServer
from tests.support.pixels import near, process_for, rgb, wait_until
from tests.support.reports import Reports

pytestmark = pytest.mark.qt

PANEL = (160, 120)
BEZEL = 0.1  # 16 px between two panels' pictures
GRID = 8  # the pattern's blocks across and down
_tokens = itertools.count(9500)


def block_colour(column: int, row: int) -> tuple[int, int, int]:
    """A colour of its own per block, far enough from its neighbours to tell apart."""
    return (column * 32 + 8, row * 32 + 8, 200 if (column + row) % 2 else 40)


def pattern(width: int, height: int) -> QImage:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    for x in range(width):
        for y in range(height):
            image.setPixelColor(x, y, QColor(*block_colour(x * GRID // width, y * GRID // height)))
    return image


def tiles(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
) -> list[tuple[Wall, KioskRenderer, Reports]]:
    made = []
    for row, column in itertools.product(range(2), range(2)):
        wall = Wall(columns=2, rows=2, column=column, row=row, bezel=BEZEL)
        renderer, reports = make_renderer(
            window_size=PANEL, wall=wall, crossfade_ms=0, compositor_check=0
        )
        # Side by side on the shared Xvfb, as the panels hang (no window manager moves them).
        renderer.stage.view.setPosition(40 + column * 200, 40 + row * 160)
        made.append((wall, renderer, reports))
    process_for(0.5)
    return made


def x_grab(renderer: KioskRenderer) -> QImage:
    """What the X server shows where the renderer's window is."""
    view = renderer.stage.view
    screen = QGuiApplication.primaryScreen()
    return screen.grabWindow(0, view.x(), view.y(), view.width(), view.height()).toImage()


def show_everywhere(made: list[tuple[Wall, KioskRenderer, Reports]], url: str, kind: str) -> None:
    plays = []
    for _, renderer, _ in made:
        play = PlayItem(next(_tokens), url, url, kind, 10.0, "request")
        renderer.show(play)
        plays.append(play)
    for (_, _, reports), play in zip(made, plays, strict=True):
        assert wait_until(lambda r=reports, p=play: p.token in r.shown_tokens(), 20)  # type: ignore[misc]
    process_for(0.3)


def check_tiles(
    made: list[tuple[Wall, KioskRenderer, Reports]], width: float, height: float
) -> None:
    """Each panel shows the wall's pattern at its tile: sampled at every block centre that
    falls well inside the panel."""
    for wall, renderer, _ in made:
        image = x_grab(renderer)
        ox, oy = wall.origin(*PANEL)
        checked = 0
        for column, row in itertools.product(range(GRID), range(GRID)):
            cx = (column + 0.5) * width / GRID - ox
            cy = (row + 0.5) * height / GRID - oy
            if not (6 <= cx < PANEL[0] - 6 and 6 <= cy < PANEL[1] - 6):
                continue
            seen = rgb(image, int(cx), int(cy))
            assert near(seen, block_colour(column, row), 10), (wall, column, row, seen)
            checked += 1
        assert checked >= 6, (wall, checked)


def test_a_picture_is_laid_out_at_the_wall_and_cropped_to_each_tile(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]], tmp_path: Path
) -> None:
    made = tiles(make_renderer)
    width, height = made[0][0].size(*PANEL)
    assert (width, height) == (336, 256)  # 2 x 160 + 16, 2 x 120 + 16
    picture = tmp_path / "wall.png"
    assert pattern(int(width), int(height)).save(str(picture))
    assert made[0][1].stage.layout_size().width() == 336  # decoded at the wall's size
    show_everywhere(made, picture.as_uri(), "image/png")
    check_tiles(made, width, height)
    # The bezel's pixels are nobody's: the right panel starts 16 px further than 160.
    right = x_grab(made[1][1])
    assert near(rgb(right, 2, 60), block_colour(176 * GRID // 336, 60 * GRID // 256), 10)


def test_a_page_is_laid_out_at_the_walls_full_resolution(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]], http_server: LoopbackServer
) -> None:
    cells = "".join(
        f"<div style='background:rgb{block_colour(c, r)}'></div>"
        for r, c in itertools.product(range(GRID), range(GRID))
    )
    page = (
        "<!doctype html><html><body style='margin:0;overflow:hidden'>"
        f"<div style='display:grid;grid-template-columns:repeat({GRID},1fr);"
        f"grid-template-rows:repeat({GRID},1fr);width:100vw;height:100vh'>{cells}</div>"
        "</body></html>"
    ).encode()
    http_server.served.files["/wall.html"] = (page, "text/html")
    made = tiles(make_renderer)
    show_everywhere(made, f"{http_server.base}/wall.html", "text/html")
    width, height = made[0][0].size(*PANEL)
    check_tiles(made, width, height)
    sizes: list[str] = []
    slot = made[3][1].region.stack.front_slot()
    assert slot is not None
    slot.evaluate("window.innerWidth + 'x' + window.innerHeight", sizes.append)
    assert wait_until(lambda: bool(sizes), 5)
    assert sizes == ["336x256"]  # the page's own viewport is the wall's


def test_the_idle_page_and_cover_are_each_panels_own(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
) -> None:
    made = tiles(make_renderer)
    _, renderer, reports = made[3]  # the bottom right panel
    assert wait_until(lambda: bool(reports.idle), 20)
    slot = renderer.region.stack.front_slot()
    assert slot is not None and slot.view is not None
    assert (slot.view.width(), slot.view.height()) == PANEL
    assert renderer.region.cover.item.width() == PANEL[0]
    # Its facts are on its own screen: the idle page is not dark where a quarter of it would be.
    assert wait_until(lambda: max(rgb(x_grab(renderer), 8, 8)) > 16, 5)


def test_a_layout_spans_the_wall(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]], http_server: LoopbackServer
) -> None:
    """main+ticker on a 2x2 wall: the boxes are fractions of the whole wall, so the ticker
    runs along the wall's bottom (the lower panels' bottom rows) and the main zone fills the
    rest; each zone's page is laid out at its part of the wall."""
    layout = Layout(
        zones=[Zone(name="main", set_name="a"), Zone(name="ticker", set_name="b")],
        template="main+ticker",
    )
    made = tiles(make_renderer)
    width, height = made[0][0].size(*PANEL)  # 336 x 256: the ticker is y 230 to 256
    for _, renderer, reports in made:
        renderer.set_layout("lobby", zone_boxes(layout))
        renderer.renderer("ticker").set_listener(reports)
    show_everywhere(made, http_server.colour("blue"), "text/html")
    plays = []
    for _, renderer, _ in made:
        url = http_server.colour("yellow")
        play = PlayItem(next(_tokens), url, url, "text/html", 10.0, "request", zone="ticker")
        renderer.renderer("ticker").show(play)
        plays.append(play)
    for (_, _, reports), play in zip(made, plays, strict=True):
        assert wait_until(lambda r=reports, p=play: p.token in r.shown_tokens(), 20)  # type: ignore[misc]
    process_for(0.3)
    for wall, renderer, _ in made:
        image = x_grab(renderer)
        _, oy = wall.origin(*PANEL)
        for y in (5, 60, PANEL[1] - 5):
            wall_y = oy + y
            wanted = COLOURS["yellow"] if wall_y >= round(0.9 * height) + 2 else COLOURS["blue"]
            if abs(wall_y - round(0.9 * height)) > 2:
                assert near(rgb(image, 80, y), wanted), (wall, y, rgb(image, 80, y))
    zone = made[3][1].regions["ticker"].stack.front_slot()
    assert zone is not None
    sizes: list[str] = []
    zone.evaluate("window.innerWidth + 'x' + window.innerHeight", sizes.append)
    assert wait_until(lambda: bool(sizes), 5)
    assert sizes == [f"{round(width)}x{round(height) - round(0.9 * height)}"]
