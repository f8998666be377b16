"""``pdn ctl upload SCHEDULER_URL FILE... [--tag T]``: files into a scheduler's media library
(``POST /x/media``, the raw body with its name in ``X-Filename``), one after the other.

For each file it shows the progress on standard error while the bytes go, then one line on
standard output: ``new``, ``already stored`` or ``refused`` with the scheduler's reason, the
file named, and any warning about where a video will not play well. The exit status is 0 when
every file is in the library, 1 when any was refused or could not be read, 3 when the
scheduler could not be reached. Outside loopback it needs the scheduler's operator token
(``PDN_API_TOKEN`` with ``PDN_API_URL``), as the other fleet commands.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import IO, Any, TextIO
from urllib.parse import quote

from server.ctl.client import EXIT_OK, EXIT_REFUSED, CtlError, base_url, call, print_json

__all__ = ["add_media_commands", "cmd_upload"]

#: Seconds the scheduler may take after the last byte (a large video is read whole to check it).
CHECK_TIMEOUT = 600.0


def add_media_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    upload = commands.add_parser(
        "upload",
        help="upload pictures, videos and page bundles (.zip) to a scheduler's media library",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    upload.add_argument("scheduler", metavar="SCHEDULER_URL")
    upload.add_argument("files", metavar="FILE", nargs="+", type=Path)
    upload.add_argument(
        "--tag", action="append", default=[], metavar="T", help="a tag for every file (repeat)"
    )
    upload.add_argument("--json", action="store_true", help="print each answer as JSON")
    upload.set_defaults(ctl_func=cmd_upload)


class Progress:
    """The file's bytes as the request body, telling ``out`` how far it got: on a terminal one
    line redrawn, elsewhere a line at each tenth."""

    def __init__(self, file: IO[bytes], size: int, name: str, out: TextIO) -> None:
        self._file, self._size, self._name, self._out = file, size, name, out
        self._sent = 0
        self._shown = -1
        self._tty = out.isatty()
        self._started = time.monotonic()

    def __len__(self) -> int:
        return self._size

    def read(self, amount: int = -1) -> bytes:
        data = self._file.read(amount)
        self._sent += len(data)
        self._show()
        return data

    def _show(self) -> None:
        tenth = self._sent * 10 // self._size if self._size else 10
        if not self._tty and tenth == self._shown:
            return
        self._shown = tenth
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = self._sent / elapsed / 1e6
        percent = self._sent * 100 // self._size if self._size else 100
        line = f"{self._name}: {percent:3d}% of {_size(self._size)} ({rate:.1f} MB/s)"
        self._out.write(f"\r{line}\x1b[K" if self._tty else f"{line}\n")
        if self._tty and self._sent >= self._size:
            self._out.write("\n")
        self._out.flush()


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _describe(path: Path, status: int, answer: dict[str, Any]) -> str:
    what = "new" if status == 201 else "already stored"
    kind = answer.get("type", "?")
    line = f"{what}: {path} -> {answer.get('url')} ({kind}, {_size(int(answer.get('size', 0)))})"
    if status == 200 and answer.get("name") != path.name:
        line += f" as '{answer.get('name')}'"
    for warning in answer.get("warnings") or []:
        line += f"\n  warning: {warning}"
    return line


def upload_one(base: str, path: Path, tags: list[str], progress: TextIO) -> tuple[int, Any]:
    """POST one file; (HTTP status, the JSON answer). CtlError when it cannot be read or the
    scheduler cannot be reached."""
    try:
        handle = path.open("rb")
        size = os.fstat(handle.fileno()).st_size
    except OSError as error:
        raise CtlError(EXIT_REFUSED, f"cannot read {path}: {error.strerror}") from None
    headers = {"X-Filename": quote(path.name)}
    if tags:
        headers["X-Tags"] = ",".join(tags)
    with handle:
        response = call(
            "POST",
            f"{base}/x/media",
            body=Progress(handle, size, path.name, progress),
            content_type="application/octet-stream",
            headers=headers,
            timeout=CHECK_TIMEOUT,
        )
    answer: Any = None
    with contextlib.suppress(ValueError):
        answer = response.json()
    return response.status_code, answer


def cmd_upload(args: argparse.Namespace) -> int:
    base = base_url(args.scheduler, "SCHEDULER_URL")
    failed = 0
    for path in args.files:
        if not path.is_file():
            print(f"refused: {path}: no such file", file=sys.stdout)
            failed += 1
            continue
        try:
            status, answer = upload_one(base, path, args.tag, sys.stderr)
        except CtlError as error:
            if error.code != EXIT_REFUSED:
                raise
            print(f"refused: {error.message}")
            failed += 1
            continue
        if args.json:
            print_json({"file": str(path), "status": status, "answer": answer})
        if status in (200, 201) and isinstance(answer, dict):
            if not args.json:
                print(_describe(path, status, answer))
            continue
        failed += 1
        reason = answer.get("message") if isinstance(answer, dict) else None
        if not args.json:
            print(f"refused: {path}: {status} {reason or 'the scheduler gave no reason'}")
    sys.stdout.flush()
    return EXIT_REFUSED if failed else EXIT_OK
