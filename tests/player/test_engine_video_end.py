"""A video played for its own length ends at its end, not when the wall clock says so.

The renderer reports the video's length when its first frame is painted; playback starts a
moment later and can stall under load, so the video's own end (``item_ended``) ends the item.
The clock is the fallback, ``NATURAL_END_GRACE`` later, for a video that never ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from player.engine import NATURAL_END_GRACE, PREPARE_LEAD
from tests.player.test_engine import Harness

VIDEOS = (
    b'<content-set name="v"><constraints><scheduling-constraints><playback order="inorder"/>'
    b"</scheduling-constraints></constraints>"
    b'<content-item content-type="video/webm"><requires-file><sources>'
    b"<uri>http://v/a.webm</uri></sources></requires-file></content-item>"
    b'<content-item content-type="video/webm"><requires-file><sources>'
    b"<uri>http://v/b.webm</uri></sources></requires-file></content-item>"
    b"</content-set>"
)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_a_late_video_plays_to_its_own_end(harness: Harness) -> None:
    harness.schedule(VIDEOS)
    harness.step()
    first = harness.paint(natural=10.0)
    assert harness.records[-1].duration == 10.0  # the record says the video's length
    harness.step(10.0 - PREPARE_LEAD + NATURAL_END_GRACE)
    assert [item.url for item in harness.renderer.prepared] == ["http://v/b.webm"]
    harness.step(PREPARE_LEAD - NATURAL_END_GRACE + 0.3)  # its length is up; it has not ended
    assert harness.renderer.last.token == first.token
    harness.engine.item_ended(first.token)
    harness.step()
    assert harness.renderer.last.url == "http://v/b.webm"


def test_a_video_that_never_ends_is_ended_by_the_clock(harness: Harness) -> None:
    harness.schedule(VIDEOS)
    harness.step()
    first = harness.paint(natural=10.0)
    harness.step(10.0 + NATURAL_END_GRACE - 0.1)
    assert harness.renderer.last.token == first.token
    harness.step(0.2)
    assert harness.renderer.last.url == "http://v/b.webm"


def test_a_preferred_duration_ends_a_video_on_time(harness: Harness) -> None:
    harness.engine.request("http://v/a.webm", 4.0)
    harness.step()
    first = harness.paint(natural=10.0)  # the request's duration wins over the video's length
    assert harness.records[-1].duration == 4.0
    harness.step(3.9)
    assert harness.records[-1].content_item == first.url
    harness.step(0.1)
    assert harness.records[-1].origin == "idle"  # the request is over; nothing else to play
