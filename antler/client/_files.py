"""Uploads and artifacts: a thread's files in the object store, as the gateway's routes keep them.

`upload_files` takes local paths (a directory is refused before anything is stored); PDF, Word,
PowerPoint and Excel files get a Markdown sibling (markitdown), as through the gateway.
`get_artifact` answers `(bytes, MIME type)` for a virtual path under /mnt/user-data/outputs (or
uploads).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from antler.client._base import Connected
from antler.client.errors import InvalidRequest, NotFound
from bus import Bus
from bus.files import safe_filename, upload_key
from gateway import uploads
from gateway.uploads import MAX_FILES


class ArtifactNotFound(NotFound, FileNotFoundError):
    """No such upload or artifact in the thread."""


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
            return await uploads.store_uploads(bus, self.user_id, thread_id, received)

        stored = await self._guarded("upload files", store_all)
        return {"success": True, "files": stored, "message": f"uploaded {len(stored)} file(s)"}

    async def list_uploads(self, thread_id: str) -> dict[str, Any]:
        """`{"files": [...], "count": N}` of the thread's uploads."""
        await self._own_thread(thread_id)
        existing = await self._guarded(
            "list uploads", lambda bus: uploads.existing(bus, self.user_id, thread_id)
        )
        found = [uploads.described(thread_id, name, size) for name, size in sorted(existing.items())]
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
            if filename not in await uploads.existing(bus, self.user_id, thread_id):
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

        async def read(bus: Bus) -> tuple[bytes, str]:
            try:
                found = await uploads.read_artifact(bus, self.user_id, thread_id, path)
            except uploads.BadArtifactPath as exc:
                raise InvalidRequest(f"path: {exc}") from None
            except uploads.NoArtifact as exc:
                raise ArtifactNotFound(f"{exc} in thread {thread_id}") from None
            return found.data, found.content_type

        return await self._guarded("read an artifact", read)
