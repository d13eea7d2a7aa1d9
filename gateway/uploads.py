"""A thread's uploads and artifacts in the object store, as the gateway's routes and `antler.Client`
both keep and read them (one copy of the rules, so the two cannot drift; no FastAPI here).

Uploads live under `uploads/<user>/<thread>/<name>`; a name already taken gets `_1`, `_2`, ...;
PDF, Word, PowerPoint and Excel files get a Markdown sibling (markitdown). An artifact is read by
its virtual path (`/mnt/user-data/outputs/...` or `/mnt/user-data/uploads/...`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from nats.js.api import ObjectMeta

from bus import Bus, layout
from bus.files import OUTPUTS, UPLOADS, list_objects, output_key, thread_prefix, upload_key

log = logging.getLogger(__name__)

CONVERTIBLE = {".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx"}
MAX_FILES = 50  # files in one upload


class BadArtifactPath(ValueError):
    """An artifact path that may not be asked for (`..` in it)."""


class NoArtifact(LookupError):
    """Nothing at that virtual path in the thread."""


def dedupe(name: str, taken: set[str]) -> str:
    """`name`, or `stem_1.ext`, `stem_2.ext`, ... if it is taken."""
    if name not in taken:
        return name
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    n = 1
    while True:
        candidate = f"{stem}_{n}.{ext}" if dot else f"{stem}_{n}"
        if candidate not in taken:
            return candidate
        n += 1


def to_markdown(data: bytes, filename: str) -> str | None:
    """A document's text as Markdown (markitdown), or None if it cannot be converted."""
    from markitdown import MarkItDown, StreamInfo

    suffix = PurePosixPath(filename).suffix.lower()
    try:
        result = MarkItDown().convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=suffix))
    except Exception as exc:  # a broken document is still uploaded, just not converted
        log.warning("could not convert %s to Markdown: %s", filename, exc)
        return None
    return result.text_content


def described(thread_id: str, name: str, size: int, markdown: str | None = None) -> dict[str, Any]:
    """One upload in DeerFlow's shape (the gateway's `UploadedFile`)."""
    virtual = layout.upload_path(name)
    return {
        "filename": name,
        "size": size,
        "path": virtual,
        "virtual_path": virtual,
        "artifact_url": f"/api/threads/{thread_id}/artifacts{virtual}",
        "markdown_file": markdown,
        "markdown_path": layout.upload_path(markdown) if markdown else None,
    }


async def existing(bus: Bus, user_id: str, thread_id: str) -> dict[str, int]:
    """The thread's uploads: name → size."""
    prefix = thread_prefix(UPLOADS, user_id, thread_id)
    infos = await list_objects(await bus.files(), prefix)
    return {i.name[len(prefix) :]: i.size or 0 for i in infos}


async def store_uploads(
    bus: Bus, user_id: str, thread_id: str, received: list[tuple[str, bytes]]
) -> list[dict[str, Any]]:
    """Store files (safe names and their bytes) in the thread's uploads, each described."""
    store = await bus.files()
    taken = set(await existing(bus, user_id, thread_id))
    stored = []
    for requested, data in received:
        name = dedupe(requested, taken)
        taken.add(name)
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        key = upload_key(user_id, thread_id, name)
        await store.put(key, data, meta=ObjectMeta(name=key, headers={"Content-Type": content_type}))
        markdown = None
        if PurePosixPath(name).suffix.lower() in CONVERTIBLE:
            text = await asyncio.to_thread(to_markdown, data, name)
            if text is not None:
                markdown = dedupe(PurePosixPath(name).stem + ".md", taken)
                taken.add(markdown)
                md_key = upload_key(user_id, thread_id, markdown)
                meta = ObjectMeta(name=md_key, headers={"Content-Type": "text/markdown"})
                await store.put(md_key, text.encode("utf-8"), meta=meta)
        stored.append(described(thread_id, name, len(data), markdown))
    return stored


@dataclass(frozen=True)
class Artifact:
    virtual: PurePosixPath
    data: bytes
    content_type: str


async def read_artifact(bus: Bus, user_id: str, thread_id: str, path: str) -> Artifact:
    """A file of the thread by its virtual path (with or without the leading slash).

    Raises:
        BadArtifactPath: the path holds `..`.
        NoArtifact: nothing there (or not under the thread's outputs or uploads).
    """
    virtual = PurePosixPath("/" + str(path).lstrip("/"))
    if ".." in virtual.parts:
        raise BadArtifactPath("'..' is not allowed in artifact paths")
    parts = virtual.parts
    if len(parts) < 5 or parts[1:3] != ("mnt", "user-data") or parts[3] not in (OUTPUTS, UPLOADS):
        raise NoArtifact(f"no artifact at {virtual}; artifacts live under {layout.OUTPUTS}")
    relative = "/".join(parts[4:])
    if parts[3] == OUTPUTS:
        key = output_key(user_id, thread_id, relative)
    else:
        key = upload_key(user_id, thread_id, relative)
    try:
        result = await (await bus.files()).get(key)
    except Exception:  # not in the object store
        raise NoArtifact(f"no artifact at {virtual}") from None
    if result.info.deleted:
        raise NoArtifact(f"no artifact at {virtual}")
    headers = dict(result.info.headers or {})
    kind = headers.get("Content-Type") or mimetypes.guess_type(virtual.name)[0] or "application/octet-stream"
    return Artifact(virtual, result.data or b"", kind)
