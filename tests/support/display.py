"""``pdn display`` as a process of its own: Qt WebEngine, waitress and SQLite for real, on a free
port with a data directory of its own, up once ``GET /`` answers.

Qt draws on the run's X server (tests/conftest.py) unless ``platform`` says otherwise
(``offscreen``: no window at all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import requests

from tests.support.process import CREDENTIALS, PdnProcess
from tests.support.waiting import wait_for_value


class DisplayProcess(PdnProcess):
    """``pdn display --data-dir <folder>/data [--config <folder>/display.toml] [args]``.

    ``config``: the TOML text of its config file (none if None); ``data_dir``: another data
    directory (one that several runs share, each with a folder and log of its own);
    ``platform``: the Qt platform (``QT_QPA_PLATFORM``); the others as ``PdnProcess``'s.
    """

    def __init__(
        self,
        folder: Path,
        args: Sequence[str] = (),
        *,
        config: str | None = None,
        data_dir: Path | None = None,
        platform: str | None = None,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = CREDENTIALS,
        port: int | None = None,
        scheme: str = "http",
        listen_flag: bool = True,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir or folder / "data"
        self.config = folder / "display.toml"
        options = ["--data-dir", str(self.data_dir)]
        if config is not None:
            self.config.write_text(config)
            options += ["--config", str(self.config)]
        settings = {"QTWEBENGINE_DISABLE_SANDBOX": "1", **(env or {})}
        if platform is not None:
            settings["QT_QPA_PLATFORM"] = platform
        super().__init__(
            "display",
            folder,
            [*options, *args],
            port=port,
            env=settings,
            unset=unset,
            scheme=scheme,
            listen_flag=listen_flag,
        )

    # -- the API a test reads ----------------------------------------------------------------

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(self.url + path, timeout=kwargs.pop("timeout", 10), **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.post(self.url + path, timeout=kwargs.pop("timeout", 10), **kwargs)

    def playback(self) -> dict[str, Any]:
        record: dict[str, Any] = self.get("/playback/").json()
        return record

    def health(self) -> dict[str, Any]:
        health: dict[str, Any] = self.get("/x/health").json()
        return health

    def wait_playback(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        """The first playback record ``check`` accepts."""
        return wait_for_value(
            self.playback, check, timeout, "a playback record as wanted", step=0.1
        )
