"""Videos over HTTP: streamed when the server answers range requests, else fetched whole.

A video sent as a URL (``POST /schedule`` in JSON) is streamed from its server. But an MP4
whose index comes after its frames (what most tools write unless told ``+faststart``) can be
streamed only from a server that answers range requests: from one that does not (Python's
``http.server``, some embedded servers) the decoder opens it and then fails to go back to its
frames. So the first request asks for a range: a 206 means stream it; a 200 is read to the
end into a file, which plays instead and is deleted when its player lets go of it. CDS items
do not come here: the content cache downloads and verifies them before they play.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import requests
from PySide6.QtCore import QObject, Signal

log = logging.getLogger("pdn.renderer")

MAX_BYTES = 4 << 30  # a video larger than this is not spooled (the disk is not ours to fill)
TIMEOUT = (10, 30)  # seconds to connect, and between two reads
CHUNK = 1 << 20


class VideoSpool(QObject):
    """Downloads on a worker thread into ``directory`` (emptied first; a temporary one when
    None)."""

    #: (token given to fetch, the file's path or "" to stream it, the reason it failed or "").
    #: Emitted by the worker thread: queued to receivers on the GUI thread.
    fetched = Signal(int, str, str)

    def __init__(self, directory: Path | None) -> None:
        super().__init__()
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="pdn-video-spool-"))
        shutil.rmtree(directory, ignore_errors=True)  # files of an earlier run
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdn-video-spool")

    def fetch(self, url: str, token: int) -> None:
        self._worker.submit(self._download, url, token)

    def forget(self, path: str) -> None:
        """The player is done with ``path``."""
        if path and Path(path).parent == self.directory:
            Path(path).unlink(missing_ok=True)

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _download(self, url: str, token: int) -> None:
        suffix = PurePosixPath(urlsplit(url).path).suffix[:8]
        target = self.directory / (hashlib.sha1(url.encode()).hexdigest() + suffix)
        partial = target.with_name(target.name + ".part")
        try:
            ranged = {"Range": "bytes=0-0"}
            with requests.get(url, headers=ranged, stream=True, timeout=TIMEOUT) as answer:
                answer.raise_for_status()
                if answer.status_code == 206:
                    self.fetched.emit(token, "", "")  # ranges work: stream it
                    return
                written = 0
                with partial.open("wb") as out:
                    for chunk in answer.iter_content(CHUNK):
                        written += len(chunk)
                        if written > MAX_BYTES:
                            raise OSError(f"larger than {MAX_BYTES >> 30} GiB")
                        out.write(chunk)
            partial.replace(target)
        except (requests.RequestException, OSError) as error:
            partial.unlink(missing_ok=True)
            self.fetched.emit(token, "", str(error)[:300])
            return
        log.info(
            "%s: its server answers no range requests: downloaded (%d MB) to play it from a file",
            url,
            written >> 20,
        )
        self.fetched.emit(token, str(target), "")
