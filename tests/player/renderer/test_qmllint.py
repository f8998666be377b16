"""Every QML file of the screen passes qmllint (the PySide6 wheel's): no unknown property, type
or member, no unqualified access, nothing else qmllint warns about. The objects Python hands
to QML are declared as typed required properties, so qmllint knows what it may ask of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

QML_DIR = Path(__file__).resolve().parents[3] / "player" / "renderer" / "qml"
QMLLINT = Path(sys.executable).parent / "pyside6-qmllint"


def lint(files: list[Path], tmp_path: Path) -> list[dict[str, object]]:
    report = tmp_path / "qmllint.json"
    subprocess.run(
        [str(QMLLINT), "--json", str(report), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found: list[dict[str, object]] = []
    for entry in json.loads(report.read_text())["files"]:
        assert entry["success"] or entry["warnings"], f"qmllint could not read {entry['filename']}"
        for warning in entry["warnings"]:
            found.append({"file": Path(entry["filename"]).name, **warning})
    return found


def test_every_qml_file_lints_without_a_warning(tmp_path: Path) -> None:
    if not QMLLINT.exists():
        pytest.fail(f"no qmllint at {QMLLINT} (it comes with the PySide6 wheel)")
    files = sorted(QML_DIR.glob("*.qml"))
    assert {f.name for f in files} >= {"Stage.qml", "Region.qml", "WebView.qml", "Fade.qml"}
    warnings = [w for w in lint(files, tmp_path) if w.get("type") != "info"]
    assert warnings == [], "\n".join(
        f"{w['file']}:{w.get('line')}: {w.get('message')} [{w.get('id')}]" for w in warnings
    )


def test_qmllint_finds_a_member_qml_does_not_know(tmp_path: Path) -> None:
    """The check above can fail: a call of an undeclared member of a typed object is found."""
    wrong = tmp_path / "Wrong.qml"
    wrong.write_text(
        "import QtQuick\n\nItem {\n    id: wrong\n"
        "    Component.onCompleted: wrong.noSuchMember()\n}\n"
    )
    ids = {w.get("id") for w in lint([wrong], tmp_path) if w.get("type") != "info"}
    assert "missing-property" in ids
