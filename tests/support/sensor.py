"""The sensor for tests: a ``SensorService`` in this process on a real waitress server, reading
a file the test writes (a CPU's thermal zone in millidegrees, or a light level).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.sensor.service import SensorService
from server.sensor.source import FileSource


def start(
    data_dir: Path,
    source: object,
    sensor_id: str = "pi-cpu",
    sensor_type: str = "cpu temperature",
    **options: Any,
) -> SensorService:
    """A sensor in this process reading ``source``, its data in ``data_dir``, serving on a
    free port of 127.0.0.1 (``service.url``); the caller stops it."""
    service = SensorService(
        source,  # type: ignore[arg-type]
        sensor_id=sensor_id,
        sensor_type=sensor_type,
        data_dir=data_dir,
        **options,
    )
    service.start()
    service.server.start()
    return service


def thermal_file(folder: Path, millidegrees: str = "48312") -> Path:
    """A thermal zone's file (``/sys/class/thermal/.../temp``) saying ``millidegrees``."""
    path = folder / "temp"
    path.write_text(f"{millidegrees}\n")
    return path


def cpu_sensor(folder: Path) -> SensorService:
    """The CPU temperature sensor ``pi-cpu``: 48.312 degrees, read every 0.05 s, sent at
    least every 30 s; its data in ``folder/sensor-data``."""
    source = FileSource(thermal_file(folder), scale=0.001)
    return start(folder / "sensor-data", source, interval=30.0, poll=0.05)


def light_sensor(folder: Path, interval: float) -> SensorService:
    """The light sensor ``lux-1`` reading 300 from ``folder/lux``, sent at least every
    ``interval`` seconds; its data in ``folder/sensor``."""
    reading = folder / "lux"
    reading.write_text("300")
    return start(folder / "sensor", FileSource(reading), "lux-1", "light", interval=interval)
