"""The skills' scripts are deterministic: the same input gives the same file, so a user who asks
again gets the same result and a diff shows only what they changed. Run directly with the
toolbox's Python (no stack: the end-to-end tests show them in the sandbox)."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from sandbox.toolbox import Toolbox
from tests.skills.conftest import SKILLS

SALES = "region,units,revenue\nNorth,12,1200.5\nEast,20,2100\nSouth,7,640\n"
DECK = {
    "slides": [
        {"layout": "title", "title": "Q3", "subtitle": "Review"},
        {"layout": "bullets", "title": "Up 12%", "bullets": ["EU", ["DE", "FR"]]},
        {"layout": "table", "title": "Regions", "csv": "sales.csv"},
        {"layout": "image", "title": "Chart", "image": "chart.png"},
    ]
}
DOC = {
    "title": "Report",
    "blocks": [
        {"type": "heading", "text": "Summary"},
        {"type": "text", "text": "It **grew**."},
        {"type": "table", "csv": "sales.csv"},
        {"type": "image", "path": "chart.png", "width": 4},
    ],
}
# (script, arguments) run in order in one folder; chart.png is also the others' picture.
RUNS = [
    ("chart-report/scripts/plot.py", ["sales.csv", "--out", "chart.png"]),
    (
        "data-analysis/scripts/to_xlsx.py",
        ["sales.csv", "--group-by", "region", "--sum", "revenue", "--out", "s.xlsx"],
    ),
    ("ppt-generation/scripts/make_deck.py", ["deck.json", "--out", "d.pptx"]),
    ("document-report/scripts/make_document.py", ["doc.json", "--out", "r.docx", "--out", "r.pdf"]),
]
FILES = ["chart.png", "s.xlsx", "d.pptx", "r.docx", "r.pdf"]
STAMPED = ("docProps/core.xml", "ppt/embeddings/")  # save times; chart data workbooks inside decks


def contents(path: Path) -> dict[str, bytes]:
    """A file's bytes, or an Office file's members (its zip entries carry the time they were written)."""
    if path.suffix in (".xlsx", ".pptx", ".docx"):
        with zipfile.ZipFile(path) as archive:
            return {n: archive.read(n) for n in archive.namelist() if not n.startswith(STAMPED)}
    return {path.name: path.read_bytes()}


def run_all(folder: Path, toolbox: Toolbox) -> None:
    folder.mkdir(parents=True)
    (folder / "sales.csv").write_text(SALES, encoding="utf-8")
    (folder / "deck.json").write_text(json.dumps(DECK), encoding="utf-8")
    (folder / "doc.json").write_text(json.dumps(DOC), encoding="utf-8")
    env = {"MPLBACKEND": "Agg", "MPLCONFIGDIR": str(folder / ".mpl"), "LANG": "C.UTF-8"}
    for script, args in RUNS:
        result = subprocess.run(
            [str(toolbox.python_dir / "bin" / "python"), str(SKILLS / "public" / script), *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr


def test_the_same_input_gives_the_same_chart_workbook_deck_and_documents(
    toolbox: Toolbox, tmp_path: Path
) -> None:
    run_all(tmp_path / "first", toolbox)
    run_all(tmp_path / "second", toolbox)
    for name in FILES:
        first, second = contents(tmp_path / "first" / name), contents(tmp_path / "second" / name)
        assert first, f"{name} is empty"
        assert first == second, f"{name} differs between two runs on the same input"
