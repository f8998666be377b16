"""Where a benchmark's figures go: one JSON file, made with its folder, and said on the
terminal, so a run always leaves the same kind of record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_figures(path: Path, figures: Any, *, echo: bool = False, quiet: bool = False) -> None:
    """``figures`` as indented JSON in ``path`` (its folder made); printed whole when
    ``echo``, else the path is, unless ``quiet`` (a file rewritten after every phase)."""
    text = json.dumps(figures, indent=2)
    if echo:
        print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    if not echo and not quiet:
        print(f"written to {path}")
