"""Uploads and artifacts: a thread's files in the object store, as the gateway's routes keep them.

`upload_files` takes local paths (a directory is refused before anything is stored); PDF, Word,
PowerPoint and Excel files get a Markdown sibling (markitdown), as through the gateway.
`get_artifact` answers `(bytes, MIME type)` for a virtual path under /mnt/user-data/outputs (or
uploads).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from nats.js.api import ObjectMeta

from antler.client._base import Connected
from antler.client.errors import InvalidRequest, NotFound
from bus import Bus, layout
from bus.files import OUTPUTS, UPLOADS, list_objects, output_key, safe_filename, thread_prefix, upload_key

log = logging.getLogger(__name__)

CONVERTIBLE = {".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx"}
MAX_FILES = 50  # files in one upload, as the gateway takes them


class ArtifactNotFound(NotFound, FileNotFoundError):
    """No such upload or artifact in the thread."""


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


def _described(thread_id: str, name: str, size: int, markdown: str | None = None) -> dict[str, Any]:
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


def _read_local(files: Sequence[str | os.PathLike[str]], limit_mb: int) -> list[tuple[str, bytes]]:
    if isinstance(files, str | os.PathLike) or not isinstance(files, Sequence):
        raise InvalidRequest("files: a list of paths of local files")
    if not files:
        raise InvalidRequest("files: at least one path")
    if len(files) > MAX_FILES:
        raise InvalidRequest(f"files: at most {MAX_FILES} in one upload; send the rest in another")
    paths = [Path(f).expanduser() for f in files]
    for path in paths:  # every one checked before anything is stored
        if path.is_dir():
            raise InvalidRequest(f"files: {path} is a directory; give the files in it")
        if not path.is_file():
            raise FileNotFoundError(f"files: no file at {path}")
        if path.stat().st_size > limit_mb * 1024 * 1024:
            raise InvalidRequest(f"files: {path} is larger than {limit_mb} MB (gateway.max_upload_mb)")
    return [(safe_filename(path.name), path.read_bytes()) for path in paths]


class Files(Connected):
    """A thread's uploads and artifacts."""

    async def _existing(self, bus: Bus, thread_id: str) -> dict[str, int]:
        prefix = thread_prefix(UPLOADS, self.user_id, thread_id)
        infos = await list_objects(await bus.files(), prefix)
        return {i.name[len(prefix) :]: i.size or 0 for i in infos}

    async def upload_files(self, thread_id: str, files: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
        """Store local files in the thread's uploads (the thread is created when new); a name
        already taken gets `_1`, `_2`... `{"success", "files": [...], "message"}`.

        Raises:
            FileNotFoundError: a path names no file.
            InvalidRequest: a path is a directory, too many files or one too large.
        """
        received = await asyncio.to_thread(_read_local, files, self.config.gateway.max_upload_mb)
        await self._own_or_new_thread(thread_id)

        async def store_all(bus: Bus) -> list[dict[str, Any]]:
            store = await bus.files()
            taken = set(await self._existing(bus, thread_id))
            stored = []
            for requested, data in received:
                name = _dedupe(requested, taken)
                taken.add(name)
                content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
                key = upload_key(self.user_id, thread_id, name)
                await store.put(key, data, meta=ObjectMeta(name=key, headers={"Content-Type": content_type}))
                markdown = None
                if PurePosixPath(name).suffix.lower() in CONVERTIBLE:
                    text = await asyncio.to_thread(_convert, data, name)
                    if text is not None:
                        markdown = _dedupe(PurePosixPath(name).stem + ".md", taken)
                        taken.add(markdown)
                        md_key = upload_key(self.user_id, thread_id, markdown)
                        meta = ObjectMeta(name=md_key, headers={"Content-Type": "text/markdown"})
                        await store.put(md_key, text.encode("utf-8"), meta=meta)
                stored.append(_described(thread_id, name, len(data), markdown))
            return stored

        stored = await self._guarded("upload files", store_all)
        return {"success": True, "files": stored, "message": f"uploaded {len(stored)} file(s)"}

    async def list_uploads(self, thread_id: str) -> dict[str, Any]:
        """`{"files": [...], "count": N}` of the thread's uploads."""
        await self._own_thread(thread_id)
        existing = await self._guarded("list uploads", lambda bus: self._existing(bus, thread_id))
        found = [_described(thread_id, name, size) for name, size in sorted(existing.items())]
        return {"files": found, "count": len(found)}

    async def delete_upload(self, thread_id: str, filename: str) -> dict[str, Any]:
        """Delete one upload: `{"success": True, "message"}`.

        Raises:
            InvalidRequest: `filename` is not a plain file name.
            FileNotFoundError (ArtifactNotFound): the thread has no upload of that name.
        """
        await self._own_thread(thread_id)
        if not isinstance(filename, str) or safe_filename(filename) != filename:
            raise InvalidRequest(f"filename: {filename!r} is not a plain file name")

        async def delete(bus: Bus) -> None:
            if filename not in await self._existing(bus, thread_id):
                raise ArtifactNotFound(f"no upload named {filename} in thread {thread_id}")
            await (await bus.files()).delete(upload_key(self.user_id, thread_id, filename))

        await self._guarded("delete an upload", delete)
        return {"success": True, "message": f"deleted {filename}"}

    async def get_artifact(self, thread_id: str, path: str) -> tuple[bytes, str]:
        """A file of the thread by its virtual path (`mnt/user-data/outputs/report.md`, with or
        without the leading slash): `(content, MIME type)`.

        Raises:
            InvalidRequest: the path holds `..`.
            FileNotFoundError (ArtifactNotFound): nothing there.
        """
        await self._own_thread(thread_id)
        virtual = PurePosixPath("/" + str(path).lstrip("/"))
        if ".." in virtual.parts:
            raise InvalidRequest("path: '..' is not allowed in artifact paths")
        parts = virtual.parts
        if len(parts) < 5 or parts[1:3] != ("mnt", "user-data") or parts[3] not in (OUTPUTS, UPLOADS):
            raise ArtifactNotFound(f"no artifact at {virtual}; artifacts live under {layout.OUTPUTS}")
        relative = "/".join(parts[4:])
        if parts[3] == OUTPUTS:
            key = output_key(self.user_id, thread_id, relative)
        else:
            key = upload_key(self.user_id, thread_id, relative)

        async def read(bus: Bus) -> tuple[bytes, str]:
            try:
                result = await (await bus.files()).get(key)
            except Exception:
                raise ArtifactNotFound(f"no artifact at {virtual} in thread {thread_id}") from None
            if result.info.deleted:
                raise ArtifactNotFound(f"no artifact at {virtual} in thread {thread_id}")
            headers = dict(result.info.headers or {})
            kind = (
                headers.get("Content-Type")
                or mimetypes.guess_type(virtual.name)[0]
                or "application/octet-stream"
            )
            return result.data or b"", kind

        return await self._guarded("read an artifact", read)
