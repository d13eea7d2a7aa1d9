"""Uploads and artifacts: a thread's files in the object store, per user.

Uploads: `POST /api/threads/{id}/uploads` (multipart `files`), `GET .../uploads/list`,
`DELETE .../uploads/{filename}`. PDF, Word, PowerPoint and Excel files get a
Markdown sibling (markitdown). `gateway.max_upload_mb` bounds each file and
the whole request, which `gateway.limits` stops reading once it passes that.
Artifacts: `GET /api/threads/{id}/artifacts/{path}`, where path is the virtual
path (`mnt/user-data/outputs/report.md`).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, File, HTTPException, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel

from bus.files import safe_filename, upload_key
from gateway import uploads
from gateway.deps import GW, Me
from gateway.schemas import errors
from gateway.uploads import MAX_FILES

log = logging.getLogger(__name__)
router = APIRouter()

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
    stored = [UploadedFile(**f) for f in await uploads.store_uploads(gw.bus, me, thread_id, received)]
    return UploadResponse(success=True, files=stored, message=f"uploaded {len(stored)} file(s)")


@router.get("/threads/{thread_id}/uploads/list", response_model=UploadList, responses=errors(404))
async def list_uploads(gw: GW, me: Me, thread_id: str) -> UploadList:
    await gw.own_thread(thread_id, me)
    existing = await uploads.existing(gw.bus, me, thread_id)
    files = [
        UploadedFile(**uploads.described(thread_id, name, size)) for name, size in sorted(existing.items())
    ]
    return UploadList(files=files, count=len(files))


@router.delete("/threads/{thread_id}/uploads/{filename}", responses=errors(400, 404))
async def delete_upload(gw: GW, me: Me, thread_id: str, filename: str) -> UploadDeleted:
    await gw.own_thread(thread_id, me)
    if safe_filename(filename) != filename:
        raise HTTPException(400, f"{filename!r} is not a plain file name")
    if filename not in await uploads.existing(gw.bus, me, thread_id):
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
    try:
        found = await uploads.read_artifact(gw.bus, me, thread_id, path)
    except uploads.BadArtifactPath as exc:
        raise HTTPException(400, str(exc)) from None
    except uploads.NoArtifact as exc:
        raise HTTPException(404, str(exc)) from None
    virtual, content_type = found.virtual, found.content_type
    response_headers = {"X-Content-Type-Options": "nosniff"}
    if download or content_type.split(";")[0].strip() in ACTIVE_TYPES:
        response_headers["Content-Disposition"] = f'attachment; filename="{virtual.name}"'
    return Response(found.data, media_type=content_type, headers=response_headers)
