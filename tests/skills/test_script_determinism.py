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
RADAR = {"kind": "radar", "axes": ["Speed", "Price", "Range"], "series": {"A": [4, 3, 5], "B": [2, 5, 3]}}
PAGE = '<html><body><h1>Shop</h1><h3>Deals</h3><img src="a.png"><a href="#">Buy</a></body></html>'
ANSWERS = {
    "agent_name": "Sprout", "user_name": "Ana", "user_role": "a gardener", "purpose": "plan beds.",
    "traits": ["Ask first.", "Be brief.", "Be kind."], "style": "Short.", "pushback": "blunt.",
    "autonomy": "Ask before deleting.", "failure": "say so.",
}  # fmt: skip
# (script, arguments) run in order in one folder; chart.png is also the others' picture.
RUNS = [
    ("chart-report/scripts/plot.py", ["sales.csv", "--out", "chart.png"]),
    (
        "data-analysis/scripts/to_xlsx.py",
        ["sales.csv", "--group-by", "region", "--sum", "revenue", "--out", "s.xlsx"],
    ),
    ("ppt-generation/scripts/make_deck.py", ["deck.json", "--out", "d.pptx"]),
    ("document-report/scripts/make_document.py", ["doc.json", "--out", "r.docx", "--out", "r.pdf"]),
    ("chart-visualization/scripts/diagram.py", ["radar.json", "--out", "radar.svg"]),
    ("web-design-guidelines/scripts/audit_page.py", ["page.html", "--out", "review.md"]),
    ("bootstrap/scripts/soul.py", ["answers.json", "--out", "SOUL.md"]),
]
FILES = ["chart.png", "s.xlsx", "d.pptx", "r.docx", "r.pdf", "radar.svg", "review.md", "SOUL.md"]
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
    (folder / "radar.json").write_text(json.dumps(RADAR), encoding="utf-8")
    (folder / "page.html").write_text(PAGE, encoding="utf-8")
    (folder / "answers.json").write_text(json.dumps(ANSWERS), encoding="utf-8")
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


def test_the_same_input_gives_the_same_charts_workbook_deck_documents_review_and_soul(
    toolbox: Toolbox, tmp_path: Path
) -> None:
    run_all(tmp_path / "first", toolbox)
    run_all(tmp_path / "second", toolbox)
    for name in FILES:
        first, second = contents(tmp_path / "first" / name), contents(tmp_path / "second" / name)
        assert first, f"{name} is empty"
        assert first == second, f"{name} differs between two runs on the same input"
