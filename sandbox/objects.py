"""Files crossing process boundaries: uploads come in from, and outputs go out to, the object store.

The gateway stores uploads as `uploads/<user>/<thread>/<name>`; before a command
or a read, the broker copies new or changed ones into the thread's uploads
directory. After a command or a write, files under outputs that are new or
changed go to `outputs/<user>/<thread>/<path>` with their content type and size,
so the gateway can serve them without sharing a disk with anyone.

Both go through `sandbox.fdpath` like every other file operation: commands can
put symlinks in outputs (and, with the local provider, in uploads), and neither
a copy in nor a publication out may follow one to the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import stat

from nats.js.api import ObjectMeta
from nats.js.object_store import ObjectStore

from bus.files import OUTPUTS, UPLOADS, list_objects, output_key, thread_prefix
from bus.layout import USER_DATA
from sandbox import fdpath
from sandbox.errors import SandboxError
from sandbox.paths import Location, ThreadFS

log = logging.getLogger(__name__)


class FileSync:
    def __init__(self, store: ObjectStore, owner: tuple[int, int] | None) -> None:
        self.store = store
        self.owner = owner
        # (user, thread) -> {relative path: (size, mtime_ns)} of outputs already published
        self._published: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}

    def forget(self, user_id: str, thread_id: str) -> None:
        """The thread is gone: what was published of it no longer says anything about a new one."""
        self._published.pop((user_id, thread_id), None)

    async def pull_uploads(self, fs: ThreadFS) -> int:
        """Copy the thread's uploads from the object store where missing or different; returns how many."""
        prefix = thread_prefix(UPLOADS, fs.user_id, fs.thread_id)
        copied = 0
        for info in await list_objects(self.store, prefix):
            name = info.name[len(prefix) :]
            if not name or "/" in name or name.startswith("."):
                continue
            try:
                target = fs.locate(f"{USER_DATA}/{UPLOADS}/{name}")
                if await asyncio.to_thread(_has_size, target, info.size or 0):
                    continue
                result = await self.store.get(info.name)
                await asyncio.to_thread(self._write, target, result.data or b"")
            except SandboxError as exc:
                log.warning("upload %r of thread %s not copied: %s", name, fs.thread_id, exc.message)
                continue
            copied += 1
        return copied

    def _write(self, target: Location, data: bytes) -> None:
        with fdpath.parent_of(target) as parent:
            fdpath.replace_file(parent, target, data, self.owner)

    async def push_outputs(self, fs: ThreadFS) -> list[str]:
        """Publish new or changed files under outputs; returns their virtual paths."""
        key = (fs.user_id, fs.thread_id)
        seen = self._published.setdefault(key, {})
        outputs = fs.locate(f"{USER_DATA}/{OUTPUTS}")
        changed = await asyncio.to_thread(_changed_files, outputs, seen)
        pushed = []
        for relative in changed:
            read = await asyncio.to_thread(_read_output, outputs.child(*relative.split("/")))
            if read is None:
                continue
            data, stamp = read
            content_type = mimetypes.guess_type(relative)[0] or "application/octet-stream"
            meta = ObjectMeta(
                name=output_key(fs.user_id, fs.thread_id, relative),
                headers={"Content-Type": content_type, "Antler-Size": str(len(data))},
            )
            await self.store.put(meta.name or "", data, meta=meta)
            seen[relative] = stamp
            pushed.append(f"{USER_DATA}/{OUTPUTS}/{relative}")
        if pushed:
            log.info("published %d output file(s) of thread %s", len(pushed), fs.thread_id)
        return pushed


def _has_size(location: Location, size: int) -> bool:
    """The file is there, a regular file, of that size."""
    try:
        with fdpath.opened(location) as (_, info):
            return stat.S_ISREG(info.st_mode) and info.st_size == size
    except SandboxError:
        return False


def _changed_files(outputs: Location, seen: dict[str, tuple[int, int]]) -> list[str]:
    """Relative paths of the regular files under outputs whose (size, mtime) is not the published one."""
    changed: list[str] = []
    try:
        with fdpath.opened(outputs) as (fd, _), contextlib.closing(fdpath.walk(fd)) as walk:
            for entry in walk:
                if not entry.is_file:
                    continue
                with fdpath.open_entry(entry) as opened:
                    if opened is None:
                        continue
                    info = opened[1]
                    relative = "/".join(entry.parts)
                    if seen.get(relative) != (info.st_size, info.st_mtime_ns):
                        changed.append(relative)
    except SandboxError:
        return []
    return changed


def _read_output(location: Location) -> tuple[bytes, tuple[int, int]] | None:
    """The content of one output file and the (size, mtime) it was read at; None if it is gone."""
    try:
        with fdpath.opened(location) as (fd, info):
            if not stat.S_ISREG(info.st_mode):
                return None
            return fdpath.read_all(fd), (info.st_size, info.st_mtime_ns)
    except SandboxError:
        return None
