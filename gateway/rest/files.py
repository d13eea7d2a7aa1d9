"""Uploads and artifacts: a thread's files in the object store, per user.

Uploads: `POST /api/threads/{id}/uploads` (multipart `files`), `GET .../uploads/list`,
`DELETE .../uploads/{filename}`. PDF, Word, PowerPoint and Excel files get a
Markdown sibling (markitdown). `gateway.max_upload_mb` bounds each file and
the whole request, which `gateway.limits` stops reading once it passes that.
Artifacts: `GET /api/threads/{id}/artifacts/{path}`, where path is the virtual
path (`mnt/user-data/outputs/report.md`).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, File, HTTPException, UploadFile
from fastapi.responses import Response
from nats.js.api import ObjectMeta
from pydantic import BaseModel

from bus import layout
from bus.files import OUTPUTS, UPLOADS, list_objects, output_key, safe_filename, thread_prefix, upload_key
from gateway.deps import GW, Me
from gateway.schemas import errors

log = logging.getLogger(__name__)
router = APIRouter()

CONVERTIBLE = {".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx"}
ACTIVE_TYPES = {"text/html", "application/xhtml+xml", "image/svg+xml"}


class UploadedFile(BaseModel):
    filename: str
    size: int
    path: str
    virtual_path: str
    artifact_url: str
    markdown_file: str | None = None
    markdown_path: str | None = None


class UploadResponse(BaseModel):
    success: bool
    files: list[UploadedFile]
    message: str


class UploadDeleted(BaseModel):
    success: bool
    message: str


class UploadList(BaseModel):
    files: list[UploadedFile]
    count: int


def _dedupe(name: str, taken: set[str]) -> str:
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


def _convert(data: bytes, filename: str) -> str | None:
    import io

    from markitdown import MarkItDown, StreamInfo

    suffix = PurePosixPath(filename).suffix.lower()
    try:
        result = MarkItDown().convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=suffix))
    except Exception as exc:  # a broken document is still uploaded, just not converted
        log.warning("could not convert %s to Markdown: %s", filename, exc)
        return None
    return result.text_content


def _described(thread_id: str, name: str, size: int, markdown: str | None = None) -> UploadedFile:
    virtual = layout.upload_path(name)
    return UploadedFile(
        filename=name,
        size=size,
        path=virtual,
        virtual_path=virtual,
        artifact_url=f"/api/threads/{thread_id}/artifacts{virtual}",
        markdown_file=markdown,
        markdown_path=layout.upload_path(markdown) if markdown else None,
    )


async def _existing(gw: GW, me: str, thread_id: str) -> dict[str, int]:
    prefix = thread_prefix(UPLOADS, me, thread_id)
    infos = await list_objects(await gw.bus.files(), prefix)
    return {i.name[len(prefix) :]: i.size or 0 for i in infos}


MAX_FILES = 50  # files in one upload request


class UploadLimits(BaseModel):
    max_files: int
    max_file_size: int
    max_total_size: int


@router.get("/threads/{thread_id}/uploads/limits", response_model=UploadLimits)
async def upload_limits(gw: GW, me: Me, thread_id: str) -> UploadLimits:
    """What one upload request may carry (bytes): the UI checks before sending."""
    limit = gw.config.gateway.max_upload_mb * 1024 * 1024
    return UploadLimits(max_files=MAX_FILES, max_file_size=limit, max_total_size=limit)


@router.post("/threads/{thread_id}/uploads", response_model=UploadResponse, responses=errors(404, 413))
async def upload(
    gw: GW, me: Me, thread_id: str, files: Annotated[list[UploadFile], File(min_length=1)]
) -> UploadResponse:
    """Store files in the thread's uploads; a thread of that id that does not exist yet is created
    for the caller (a new chat uploads its attachments before its first run)."""
    await gw.own_or_new_thread(thread_id, me)
    if len(files) > MAX_FILES:
        raise HTTPException(413, f"at most {MAX_FILES} files in one upload; send the rest in another")
    limit = gw.config.gateway.max_upload_mb * 1024 * 1024
    received: list[tuple[str, bytes]] = []
    for item in files:
        data = await item.read(limit + 1)
        if len(data) > limit:
            raise HTTPException(413, f"{item.filename} is larger than {gw.config.gateway.max_upload_mb} MB")
        received.append((safe_filename(item.filename or ""), data))
    store = await gw.bus.files()
    taken = set(await _existing(gw, me, thread_id))
    stored: list[UploadedFile] = []
    for requested, data in received:
        name = _dedupe(requested, taken)
        taken.add(name)
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        key = upload_key(me, thread_id, name)
        await store.put(key, data, meta=ObjectMeta(name=key, headers={"Content-Type": content_type}))
        markdown = None
        if PurePosixPath(name).suffix.lower() in CONVERTIBLE:
            text = await asyncio.to_thread(_convert, data, name)
            if text is not None:
                markdown = _dedupe(PurePosixPath(name).stem + ".md", taken)
                taken.add(markdown)
                md_key = upload_key(me, thread_id, markdown)
                meta = ObjectMeta(name=md_key, headers={"Content-Type": "text/markdown"})
                await store.put(md_key, text.encode("utf-8"), meta=meta)
        stored.append(_described(thread_id, name, len(data), markdown))
    return UploadResponse(success=True, files=stored, message=f"uploaded {len(stored)} file(s)")


@router.get("/threads/{thread_id}/uploads/list", response_model=UploadList, responses=errors(404))
async def list_uploads(gw: GW, me: Me, thread_id: str) -> UploadList:
    await gw.own_thread(thread_id, me)
    existing = await _existing(gw, me, thread_id)
    files = [_described(thread_id, name, size) for name, size in sorted(existing.items())]
    return UploadList(files=files, count=len(files))


@router.delete("/threads/{thread_id}/uploads/{filename}", responses=errors(400, 404))
async def delete_upload(gw: GW, me: Me, thread_id: str, filename: str) -> UploadDeleted:
    await gw.own_thread(thread_id, me)
    if safe_filename(filename) != filename:
        raise HTTPException(400, f"{filename!r} is not a plain file name")
    if filename not in await _existing(gw, me, thread_id):
        raise HTTPException(404, f"no upload named {filename}")
    await (await gw.bus.files()).delete(upload_key(me, thread_id, filename))
    return UploadDeleted(success=True, message=f"deleted {filename}")


@router.get(
    "/threads/{thread_id}/artifacts/{path:path}",
    response_class=Response,
    responses={
        200: {
            "description": "The file, with its type (HTML, XHTML and SVG always as attachments)",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        },
        **errors(400, 404),
    },
)
async def artifact(gw: GW, me: Me, thread_id: str, path: str, download: bool = False) -> Response:
    await gw.own_thread(thread_id, me)
    virtual = PurePosixPath("/" + path.lstrip("/"))
    if ".." in virtual.parts:
        raise HTTPException(400, "'..' is not allowed in artifact paths")
    parts = virtual.parts
    if len(parts) < 5 or parts[1:3] != ("mnt", "user-data") or parts[3] not in (OUTPUTS, UPLOADS):
        raise HTTPException(404, f"no artifact at {virtual}; artifacts live under {layout.OUTPUTS}")
    relative = "/".join(parts[4:])
    key = output_key(me, thread_id, relative) if parts[3] == OUTPUTS else upload_key(me, thread_id, relative)
    store = await gw.bus.files()
    try:
        result = await store.get(key)
    except Exception:
        raise HTTPException(404, f"no artifact at {virtual}") from None
    if result.info.deleted:
        raise HTTPException(404, f"no artifact at {virtual}")
    headers = dict(result.info.headers or {})
    content_type = (
        headers.get("Content-Type") or mimetypes.guess_type(virtual.name)[0] or "application/octet-stream"
    )
    response_headers = {"X-Content-Type-Options": "nosniff"}
    if download or content_type.split(";")[0].strip() in ACTIVE_TYPES:
        response_headers["Content-Disposition"] = f'attachment; filename="{virtual.name}"'
    return Response(result.data or b"", media_type=content_type, headers=response_headers)
