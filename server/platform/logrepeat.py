"""Keep a message that repeats (a render process that keeps failing, a scanner's connections)
from flooding the journal: :class:`RepeatFilter`, added to a logger, lets a burst of each message
through per window and says how many it dropped."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RepeatFilter"]


class RepeatFilter(logging.Filter):
    """Lets the first ``burst`` records of one message (logger, level, format) through in each
    ``window`` seconds, then drops them, and says how many were dropped when the window ends."""

    def __init__(self, burst: int = 5, window: float = 60.0) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = time.monotonic()
        with self._lock:
            start, count = self._seen.get(key, (now, 0))
            if now - start >= self.window:
                dropped = count - self.burst
                if dropped > 0:
                    record.msg = f"{record.msg} (and {dropped} more like it in {self.window:g} s)"
                start, count = now, 0
            count += 1
            self._seen[key] = (start, count)
            if len(self._seen) > 1000:
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
        return count <= self.burst
