"""Where a sensor's readings come from, and the loop that pushes them to subscribers.

A source is a shell command (its standard output), a file (e.g. a Linux thermal zone), or a
fixed data-source URI (a stream address). The :class:`SensorLoop` reads the source often
(``poll`` seconds), pushes at once when the reading changes, and pushes the current reading
every ``interval`` seconds anyway, so a subscriber that missed one soon has the value again.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("pdn.sensor")

MAX_READING = 64 * 1024


class SourceError(Exception):
    """The source could not be read this time."""


@dataclass(frozen=True)
class Reading:
    """One reading: ``text`` for the segment's own GET / (a string, as the spec says),
    ``value`` for pushed updates (a number when numeric), or a ``data_source`` URI."""

    text: str | None = None
    value: Any = None
    data_source: str | None = None

    def update_body(self, sensor_id: str, sensor_type: str) -> dict[str, Any]:
        body: dict[str, Any] = {"sensor-id": sensor_id, "sensor-type": sensor_type}
        if self.data_source is not None:
            body["data-source"] = self.data_source
        else:
            body["data"] = self.value
        return body

    def info_body(self, sensor_id: str, sensor_type: str) -> dict[str, Any]:
        body: dict[str, Any] = {"sensor-id": sensor_id, "sensor-type": sensor_type}
        if self.data_source is not None:
            body["data-source"] = self.data_source
        else:
            body["data"] = self.text
        return body


def _number(text: str) -> float | int | None:
    try:
        number = json.loads(text)
    except ValueError:
        return None
    if isinstance(number, bool) or not isinstance(number, int | float):
        return None
    return number if math.isfinite(number) else None


def _tidy(number: float) -> int | float:
    """Drop float noise from scaling (48312 * 0.001 is 48.312, not 48.312000000000005)."""
    tidy = float(f"{number:.12g}")
    return int(tidy) if tidy.is_integer() and abs(tidy) < 2**53 else tidy


def make_reading(raw: str, *, scale: float | None = None, as_json: bool = False) -> Reading:
    """A reading from raw source text: numeric text becomes a number (scaled when asked)."""
    text = raw.strip()
    number = _number(text)
    if number is not None:
        if scale is not None:
            number = _tidy(number * scale)
        return Reading(text=json.dumps(number), value=number)
    if as_json:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        return Reading(text=text, value=value)
    return Reading(text=text, value=text)


class Source(Protocol):
    def read(self) -> Reading: ...

    def describe(self) -> str: ...


class CommandSource:
    """A shell command's standard output (parsed as JSON when it can be, else text)."""

    def __init__(self, command: str, *, timeout: float, scale: float | None = None) -> None:
        self.command = command
        self.timeout = timeout
        self.scale = scale

    def describe(self) -> str:
        return f"command {self.command!r}"

    def read(self) -> Reading:
        try:
            # The operator's own command line, run as a shell would (pipes, variables).
            done = subprocess.run(
                ["/bin/sh", "-c", self.command],
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SourceError(f"the command did not finish within {self.timeout:g} s") from None
        except OSError as error:
            raise SourceError(f"the command could not run: {error}") from None
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", "replace").strip()[:200]
            raise SourceError(f"the command exited with {done.returncode}: {detail}")
        output = done.stdout[:MAX_READING].decode("utf-8", "replace")
        if not output.strip():
            raise SourceError("the command printed nothing")
        return make_reading(output, scale=self.scale, as_json=True)


class FileSource:
    """A file's contents, such as /sys/class/thermal/thermal_zone0/temp."""

    def __init__(self, path: Path, *, scale: float | None = None) -> None:
        self.path = path
        self.scale = scale

    def describe(self) -> str:
        return f"file {self.path}"

    def read(self) -> Reading:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(MAX_READING)
        except OSError as error:
            raise SourceError(f"cannot read {self.path}: {error.strerror or error}") from None
        text = data.decode("utf-8", "replace")
        if not text.strip():
            raise SourceError(f"{self.path} is empty")
        return make_reading(text, scale=self.scale)


class DataSourceUri:
    """A fixed URI from which the data can be read (a video stream, a feed)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def describe(self) -> str:
        return f"data-source {self.uri}"

    def read(self) -> Reading:
        return Reading(data_source=self.uri)


#: publish(update_body): hand one update to every subscriber (through the outbox).
Publisher = Callable[[dict[str, Any]], None]


class SensorLoop:
    """Reads the source and publishes updates: at once on change, and every ``interval``."""

    def __init__(
        self,
        source: Source,
        sensor_id: str,
        sensor_type: str,
        publish: Publisher,
        *,
        interval: float = 10.0,
        poll: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.sensor_id = sensor_id
        self.sensor_type = sensor_type
        self._publish = publish
        self._interval = interval
        self._poll = min(poll, interval)
        self._clock = clock
        self._lock = threading.Lock()
        self._latest: Reading | None = None
        self._last_published: float | None = None
        self._last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def latest(self) -> Reading | None:
        with self._lock:
            return self._latest

    def start(self) -> None:
        self.step()
        self._thread = threading.Thread(target=self._run, name="sensor-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.step()
            except Exception:
                log.exception("reading the sensor failed")

    def step(self) -> None:
        """Read once; publish when the reading changed or the interval has passed."""
        try:
            reading = self.source.read()
        except SourceError as error:
            message = str(error)
            if message != self._last_error:
                log.warning("%s: %s (keeping the last reading)", self.source.describe(), message)
                self._last_error = message
            reading = None
        else:
            if self._last_error is not None:
                log.info("%s: readable again", self.source.describe())
                self._last_error = None
        now = self._clock()
        with self._lock:
            changed = reading is not None and reading != self._latest
            if reading is not None:
                self._latest = reading
            current = self._latest
            due = self._last_published is None or now - self._last_published >= self._interval
        if current is not None and (changed or due):
            self._last_published = now
            self.publish_current()

    def publish_current(self) -> None:
        current = self.latest
        if current is not None:
            self._publish(current.update_body(self.sensor_id, self.sensor_type))
