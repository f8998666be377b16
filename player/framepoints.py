"""Where the display looks at a frame to tell what it shows, with no Qt: 13 points (a 3x3 grid
at the quarters and the four corners, one pixel in) and the level under which a point is
black. The renderer's grabs (``classify_frame``), the compositor's screenshots
(``ppm_frame_class``) and the benchmarks that read a screen from outside all look at these."""

from __future__ import annotations

DARK = 16  # a point with every channel below this is black


def sample_points(width: int, height: int) -> list[tuple[int, int]]:
    points = [(width * i // 4, height * j // 4) for i in (1, 2, 3) for j in (1, 2, 3)]
    return [*points, (1, 1), (width - 2, 1), (1, height - 2), (width - 2, height - 2)]
