"""Open what a skill produced with the library made for it (the toolbox's python-pptx, openpyxl,
python-docx, pypdf) and say what is inside, as plain data the test can compare."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path
from typing import Any

from sandbox.toolbox import Toolbox

_READERS = {
    ".pptx": """
from pptx import Presentation
deck = Presentation(path)
slides = []
for slide in deck.slides:
    slides.append({
        "title": slide.shapes.title.text if slide.shapes.title is not None else None,
        "text": [s.text_frame.text for s in slide.shapes if s.has_text_frame],
        "charts": sum(1 for s in slide.shapes if s.has_chart),
        "tables": sum(1 for s in slide.shapes if s.has_table),
        "pictures": sum(1 for s in slide.shapes if s.shape_type == 13),
        "notes": slide.notes_slide.notes_text_frame.text if slide.has_notes_slide else "",
    })
found = {"slides": slides, "width_in": deck.slide_width / 914400, "title": deck.core_properties.title}
""",
    ".xlsx": """
from openpyxl import load_workbook
book = load_workbook(path)
found = {"sheets": {ws.title: {"rows": [[c.value for c in row] for row in ws.iter_rows()],
                               "charts": len(ws._charts), "frozen": ws.freeze_panes,
                               "filter": ws.auto_filter.ref} for ws in book.worksheets}}
""",
    ".docx": """
import docx
doc = docx.Document(path)
found = {"paragraphs": [(p.style.name, p.text) for p in doc.paragraphs],
         "tables": [[[c.text for c in row.cells] for row in t.rows] for t in doc.tables],
         "pictures": len(doc.inline_shapes), "title": doc.core_properties.title}
""",
    ".pdf": """
from pypdf import PdfReader
reader = PdfReader(path)
found = {"pages": len(reader.pages), "text": "\\n".join(p.extract_text() or "" for p in reader.pages),
         "title": reader.metadata.title if reader.metadata else None}
""",
}


async def open_document(toolbox: Toolbox, path: Path) -> dict[str, Any]:
    """What a .pptx, .xlsx, .docx or .pdf file holds, read by its library in the toolbox's Python."""
    code = (
        "import json, sys\npath = sys.argv[1]\n" + _READERS[path.suffix.lower()] + "print(json.dumps(found))"
    )
    proc = await asyncio.create_subprocess_exec(
        str(toolbox.python_dir / "bin" / "python"),
        "-c",
        code,
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{path.name} cannot be opened by its library:\n{err.decode()[-2000:]}"
    found: dict[str, Any] = json.loads(out)
    return found


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG (failing the test when it is not one)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
