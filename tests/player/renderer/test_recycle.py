"""The memory budget on a real renderer (Qt WebEngine on the test run's X server): the tree
measurement finds Chromium's processes, and a display over its budget gives memory back at the
item boundary with no blank frame (two views, or one view behind a still)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import pytest

from player.memory import MemoryPlan, MemoryWatch, measure_tree
from player.playitem import PlayItem
from player.renderer import KioskRenderer, RendererOptions
from tests.player.conftest import COLOURS, LoopbackServer
from tests.support.pixels import FrameSampler, process_for, uniform_colour, wait_until
from tests.support.reports import Reports

pytestmark = pytest.mark.qt

SIZE = (320, 240)
_tokens = count(1)


def page(url: str) -> PlayItem:
    return PlayItem(
        token=next(_tokens),
        url=url,
        source_url=url,
        content_type="text/html",
        duration=10.0,
        origin="request",
    )


def show_and_wait(renderer: KioskRenderer, reports: Reports, play: PlayItem) -> None:
    renderer.show(play)
    assert wait_until(
        lambda: play.token in reports.shown_tokens() or play.token in reports.failed_tokens(),
        15,
    ), f"no report for {play.url}"
    assert play.token in reports.shown_tokens(), reports.failed


@pytest.fixture(params=[2, 1], ids=["two-views", "one-view"])
def watched(
    qapp: object, request: pytest.FixtureRequest
) -> Iterator[tuple[KioskRenderer, Reports, MemoryWatch]]:
    # A budget no display can meet: every measurement is over it.
    watch = MemoryWatch(MemoryPlan(budget_mb=1, low_memory=False), interval=0.1)
    renderer = KioskRenderer(
        RendererOptions(
            fullscreen=False, window_size=SIZE, keep_screen_on=False, views=request.param
        ),
        memory=watch,
    )
    reports = Reports()
    renderer.set_listener(reports)
    watch.start()
    yield renderer, reports, watch
    watch.stop()
    renderer.close()


def test_tree_measurement_finds_chromium_processes(
    watched: tuple[KioskRenderer, Reports, MemoryWatch], http_server: LoopbackServer
) -> None:
    renderer, reports, _ = watched
    show_and_wait(renderer, reports, page(http_server.colour("red")))
    front = renderer.region.stack.front_slot()
    assert front is not None and front.render_pid() > 0
    tree = measure_tree()
    roles = {process.pid: process.role for process in tree.processes}
    assert roles[front.render_pid()] == "render"
    by_role = tree.by_role()
    assert by_role["browser"]["count"] == 1 and by_role["browser"]["pss_mb"] > 50
    assert by_role["zygote"]["count"] >= 1
    # Every one of Chromium's helpers is a QtWebEngineProcess with a role we know.
    for process in tree.processes:
        if process.role != "browser":
            with open(f"/proc/{process.pid}/cmdline", "rb") as stream:
                assert b"QtWebEngineProcess" in stream.read()
            assert process.role in ("render", "zygote", "gpu", "utility")
    assert tree.pss_mb > by_role["browser"]["pss_mb"]


def test_over_budget_gives_memory_back_at_the_boundary_without_a_blank_frame(
    watched: tuple[KioskRenderer, Reports, MemoryWatch], http_server: LoopbackServer
) -> None:
    renderer, reports, watch = watched
    names = ["red", "blue", "green", "yellow"]
    show_and_wait(renderer, reports, page(http_server.colour(names[0])))
    sampler = FrameSampler(renderer, [COLOURS[name] for name in names])
    sampler.start()
    on_screen_views = []
    for index in range(1, 9):
        name = names[index % len(names)]
        front_before = renderer.region.stack.layer
        show_and_wait(renderer, reports, page(http_server.colour(name)))
        on_screen_views.append(front_before)
        assert uniform_colour(renderer.grab_image()) == COLOURS[name]
        process_for(0.4)  # a measurement after the swap (and the old view blanked)
    sampler.stop()
    assert sampler.bad == [], f"{len(sampler.bad)} of {sampler.samples} frames: {sampler.bad[:3]}"
    assert sampler.samples > 100
    status = watch.status()
    # At item boundaries: at most once per measurement, never a view on screen.
    assert status["recycles"] >= 3
    assert renderer.recycler.memory_recycles == status["recycles"]
    assert status["recycles"] <= sum(slot.loads for slot in renderer.region.slots)
    assert all(view is not None for view in on_screen_views)
    # The views renewed and the tree still over its (impossible) budget: degraded, honestly.
    assert status["over_budget"] is True
    assert "stays over its budget" in status["problem"]
    assert status["pss_mb"] > 50 and status["by_role"]["render"]["count"] >= 1
