"""Files crossing process boundaries: uploads come in from, and outputs go out to, the object store.

The gateway stores uploads as `uploads/<user>/<thread>/<name>`; before a command
or a read, the broker copies new or changed ones into the thread's uploads
directory. After a command or a write, files under outputs that are new or
changed go to `outputs/<user>/<thread>/<path>` with their content type and size,
so the gateway can serve them without sharing a disk with anyone.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
from pathlib import Path

from nats.js.api import ObjectMeta
from nats.js.object_store import ObjectStore

from bus.files import OUTPUTS, UPLOADS, list_objects, output_key, thread_prefix
from sandbox.paths import ThreadFS

log = logging.getLogger(__name__)


class FileSync:
    def __init__(self, store: ObjectStore, owner: tuple[int, int] | None) -> None:
        self.store = store
        self.owner = owner
        # (user, thread) -> {relative path: (size, mtime_ns)} of outputs already published
        self._published: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}

    async def pull_uploads(self, fs: ThreadFS) -> int:
        """Copy the thread's uploads from the object store where missing or different; returns how many."""
        prefix = thread_prefix(UPLOADS, fs.user_id, fs.thread_id)
        copied = 0
        for info in await list_objects(self.store, prefix):
            name = info.name[len(prefix) :]
            if not name or "/" in name or name.startswith("."):
                continue
            target = fs.uploads / name
            if target.is_file() and target.stat().st_size == (info.size or 0):
                continue
            result = await self.store.get(info.name)
            await asyncio.to_thread(self._write, target, result.data or b"")
            copied += 1
        return copied

    def _write(self, target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if self.owner is not None:
            os.chown(target, *self.owner)

    async def push_outputs(self, fs: ThreadFS) -> list[str]:
        """Publish new or changed files under outputs; returns their virtual paths."""
        key = (fs.user_id, fs.thread_id)
        seen = self._published.setdefault(key, {})
        changed = await asyncio.to_thread(_changed_files, fs.outputs, seen)
        pushed = []
        for relative, stamp in changed:
            host = fs.outputs / relative
            try:
                data = await asyncio.to_thread(host.read_bytes)
            except OSError:
                continue
            content_type = mimetypes.guess_type(relative)[0] or "application/octet-stream"
            meta = ObjectMeta(
                name=output_key(fs.user_id, fs.thread_id, relative),
                headers={"Content-Type": content_type, "Antler-Size": str(len(data))},
            )
            await self.store.put(meta.name or "", data, meta=meta)
            seen[relative] = stamp
            pushed.append(f"/mnt/user-data/{OUTPUTS}/{relative}")
        if pushed:
            log.info("published %d output file(s) of thread %s", len(pushed), fs.thread_id)
        return pushed


def _changed_files(root: Path, seen: dict[str, tuple[int, int]]) -> list[tuple[str, tuple[int, int]]]:
    changed = []
    if not root.is_dir():
        return changed
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        stat = path.stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
        if seen.get(relative) != stamp:
            changed.append((relative, stamp))
    return changed
