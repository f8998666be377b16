"""Run a Python module with a sampling profiler over all its threads (py-spy is not installed).

    python tests/bench/stack_sampler.py OUT.txt -m server.cli scheduler --port ...

Every ``PDN_SAMPLE_INTERVAL`` seconds (default 0.01) the stacks of every thread are read
(``sys._current_frames``); a thread counts as busy unless its innermost frame is a known
waiting call (socket accept/recv, lock/condition waits, select). At exit (SIGTERM included)
OUT.txt gets the busy samples per innermost project function and per whole stack, most first.
"""

from __future__ import annotations

import atexit
import collections
import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

WAITING = {
    "wait",
    "select",
    "poll",
    "accept",
    "recv",
    "recv_into",
    "readinto",
    "_wait_for_tstate_lock",
    "sleep",
    "notifies",
    "_run_once",
    "get",
    "_worker",
    "handler_thread",
    "run",
    "wait_conn",
    "_recv",
}


def _stack(frame: FrameType | None) -> list[str]:
    names = []
    while frame is not None:
        code = frame.f_code
        names.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back
    return names


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2] != "-m":
        raise SystemExit("usage: stack_sampler.py OUT -m MODULE ARGS...")
    module = sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    interval = float(os.environ.get("PDN_SAMPLE_INTERVAL", "0.01"))
    by_function: collections.Counter[str] = collections.Counter()
    by_stack: collections.Counter[str] = collections.Counter()
    samples = [0]
    me = threading.get_ident()

    def sample() -> None:
        while True:
            time.sleep(interval)
            samples[0] += 1
            for ident, frame in sys._current_frames().items():
                if ident == me or frame is None:
                    continue
                if frame.f_code.co_name in WAITING:
                    continue
                stack = _stack(frame)
                by_stack[" < ".join(stack[:12])] += 1
                project = next((s for s in stack if not s.startswith(("threading", "<"))), "?")
                by_function[project] += 1

    def write() -> None:
        lines = [f"samples: {samples[0]} every {interval} s"]
        lines += [f"{n:7d} {name}" for name, n in by_function.most_common(40)]
        lines.append("")
        lines += [f"{n:7d} {name}" for name, n in by_stack.most_common(40)]
        out.write_text("\n".join(lines) + "\n")

    threading.Thread(target=sample, name="stack-sampler", daemon=True).start()
    atexit.register(write)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
