"""A thread's uploads as the model navigates them: `list_uploaded_files` and the prompt's outlines.

Uploads live in the object store (`uploads/<user>/<thread>/<name>`, written by the gateway, the
chat adapters and the agent-protocol host); the gateway stores a Markdown sibling of each office
document and PDF (`report.md` beside `report.pdf`). The runner reads them from there (its NATS
user has the object store), never from a sandbox's disk, so it works whichever broker serves the
thread. What the model gets, as in DeerFlow: each file's name, size and path, and on request its
outline (`agents.file_outline`), so it reads the part it needs with `read_file` line ranges.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from agents.file_outline import Outline, defuse, outline_of
from agents.tool_decorator import tool
from bus import Bus
from bus.files import UPLOADS, list_objects, thread_prefix, upload_key
from bus.layout import upload_path

log = logging.getLogger(__name__)

# The gateway's markitdown conversions (gateway/rest/files.py CONVERTIBLE) and text we outline as is.
CONVERTED = {".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx"}
TEXT = {".md", ".markdown", ".txt", ".rst", ".csv", ".tsv", ".json", ".yaml", ".yml"}
DEFAULT_RESULTS, MAX_RESULTS = 20, 100
# The prompt's outlines together: at most this many lines, whatever was uploaded.
PROMPT_OUTLINE_LINES = 150


@dataclass(frozen=True)
class Upload:
    name: str
    size: int
    modified: str  # ISO time the object store recorded ("" when it has none)


async def thread_uploads(bus: Bus, user_id: str, thread_id: str) -> list[Upload]:
    """The thread's uploads, newest first, without the gateway's Markdown conversions of them."""
    prefix = thread_prefix(UPLOADS, user_id, thread_id)
    infos = await list_objects(await bus.files(), prefix)
    found = [Upload(i.name[len(prefix) :], i.size or 0, str(i.mtime or "")) for i in infos]
    names = {u.name for u in found}
    kept = [u for u in found if "/" not in u.name and not _is_conversion(u.name, names)]
    return sorted(kept, key=lambda u: (u.modified, u.name), reverse=True)


def _is_conversion(name: str, names: set[str]) -> bool:
    path = PurePosixPath(name)
    return path.suffix == ".md" and any(f"{path.stem}{suffix}" in names for suffix in CONVERTED)


def outline_source(name: str, names: set[str]) -> str | None:
    """The upload whose text outlines `name`: its Markdown sibling, itself, or None (nothing to read)."""
    path = PurePosixPath(name)
    suffix = path.suffix.lower()
    if suffix in CONVERTED:
        sibling = f"{path.stem}.md"
        return sibling if sibling in names else None
    return name if suffix in TEXT else None


async def outline_upload(bus: Bus, user_id: str, thread_id: str, name: str, names: set[str]) -> Outline:
    """`name`'s outline; empty when it has no text we can read (an image, a failed conversion)."""
    source = outline_source(name, names)
    if source is None:
        return Outline()
    try:
        found = await (await bus.files()).get(upload_key(user_id, thread_id, source))
    except Exception as exc:  # deleted meanwhile, or the store unreachable: the list still helps
        log.info("no outline for upload %s of thread %s: %s", name, thread_id, exc)
        return Outline()
    return outline_of((found.data or b"").decode("utf-8", errors="replace"))


async def current_outlines(
    bus: Bus, user_id: str, thread_id: str, uploads: Sequence[tuple[str, str, int]]
) -> dict[str, Outline]:
    """Outlines of the files sent with this message (by upload path), for the prompt; best effort."""
    if not uploads:
        return {}
    try:
        names = await _all_names(bus, user_id, thread_id)
    except Exception as exc:
        log.warning("thread %s: could not list its uploads for their outlines: %s", thread_id, exc)
        return {}
    found: dict[str, Outline] = {}
    for _, path, _ in uploads:
        name = path.rsplit("/", 1)[-1]
        if name in names:
            found[path] = await outline_upload(bus, user_id, thread_id, name, names)
    return found


async def _all_names(bus: Bus, user_id: str, thread_id: str) -> set[str]:
    prefix = thread_prefix(UPLOADS, user_id, thread_id)
    return {i.name[len(prefix) :] for i in await list_objects(await bus.files(), prefix)}


def outline_lines(outline: Outline | None, budget: int) -> list[str]:
    """A file's outline for the prompt's uploads section, within `budget` lines."""
    if outline is None:
        return []
    shown = outline.lines()
    if not shown:
        return []
    heading = (
        "  Outline (read sections with read_file start_line/end_line):"
        if outline.entries
        else "  No headings; it begins with:"
    )
    if len(shown) > budget:
        shown = [*shown[: max(budget - 1, 0)], "    ... (outline cut; list_uploaded_files shows it whole)"]
    return [heading, *shown]


async def prompt_outlines(
    bus: Bus, user_id: str, thread_id: str, uploads: Sequence[tuple[str, str, int]]
) -> dict[str, list[str]]:
    """The prompt lines of each current upload's outline (by path), `PROMPT_OUTLINE_LINES` in all."""
    outlines = await current_outlines(bus, user_id, thread_id, uploads)
    found: dict[str, list[str]] = {}
    left = PROMPT_OUTLINE_LINES
    for _, path, _ in uploads:
        lines = outline_lines(outlines.get(path), left - 1)
        if lines:
            found[path] = lines
            left -= len(lines)
        if left <= 2:
            break
    return found


def _current_names(runtime: ToolRuntime[Any, Any]) -> set[str]:
    """The files sent with the message being answered (listed in the prompt already)."""
    from agents.assembly import current_uploads  # the runner's module: imported when the tool runs

    state = runtime.state if isinstance(runtime.state, dict) else {}
    messages = [
        m if isinstance(m, dict) else {"type": m.type, "additional_kwargs": m.additional_kwargs}
        for m in state.get("messages") or []
    ]
    return {path.rsplit("/", 1)[-1] for _, path, _ in current_uploads({"messages": messages})}


def make_upload_tools(bus: Bus) -> list[BaseTool]:
    """`list_uploaded_files`, bound to one bus connection."""

    @tool
    async def list_uploaded_files(
        runtime: ToolRuntime[Any, Any],
        include_outline: bool | list[str] = False,
        max_results: int = DEFAULT_RESULTS,
    ) -> str:
        """List the files the user uploaded to this thread in earlier messages, newest first.

        Files sent with the current message are already listed in the prompt (<current_uploads>).
        Use this when the user refers to files uploaded before ("those PDFs") or to see what data
        the thread has. When the user names a file, read it directly with read_file or grep.

        Args:
            include_outline: True for every file's outline (headings, pages, slides, sheets with line
                numbers), or a list of file names to outline only those; False for names and sizes.
            max_results: At most this many files (default 20, at most 100).
        """
        context = runtime.context
        user_id, thread_id = getattr(context, "user_id", "default"), getattr(context, "thread_id", "")
        uploads = await thread_uploads(bus, user_id, thread_id)
        current = _current_names(runtime)
        earlier = [u for u in uploads if u.name not in current]
        if not earlier:
            return json.dumps(
                {"files": [], "total_count": 0, "message": "No earlier uploads in this thread."}
            )
        limit = max(1, min(int(max_results), MAX_RESULTS))
        wanted = set(include_outline) if isinstance(include_outline, list) else set()
        names = await _all_names(bus, user_id, thread_id)
        files: list[dict[str, Any]] = []
        for upload in earlier[:limit]:
            entry: dict[str, Any] = {
                "filename": defuse(upload.name, 200),
                "size": upload.size,
                "path": defuse(upload_path(upload.name), 250),
            }
            if include_outline is True or upload.name in wanted:
                outline = await outline_upload(bus, user_id, thread_id, upload.name, names)
                if outline.entries:
                    entry["outline"] = [{"line": line, "title": title} for line, title in outline.entries]
                    if outline.truncated:
                        entry["outline_truncated"] = True
                elif outline.preview:
                    entry["outline_preview"] = list(outline.preview)
            files.append(entry)
        result: dict[str, Any] = {
            "files": files,
            "total_count": len(earlier),
            "message": f"Found {len(earlier)} earlier upload(s).",
        }
        if len(earlier) > limit:
            result["truncated"] = True
        return json.dumps(result, ensure_ascii=False)

    return [list_uploaded_files]
