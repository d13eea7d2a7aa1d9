"""File operations on a thread's virtual paths: read, write, list, str_replace, glob.

They run in a worker thread (disk I/O stays off the event loop). Every one opens
its files through `sandbox.fdpath` (beneath the mount's root descriptor, never
through a symlink), so a command changing names under them cannot point them at
the host. Writers of one path are serialized by the broker (`PathLocks`), so two
concurrent edits never interleave.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import mimetypes
import os
import stat
from collections import defaultdict
from pathlib import PurePosixPath

from config import SandboxConfig
from sandbox import fdpath
from sandbox.errors import Conflict, InvalidRequest, NotFound, TooLarge
from sandbox.hygiene import truncate
from sandbox.paths import ThreadFS

MAX_LIST_ENTRIES = 500
MAX_GLOB_RESULTS = 500


class PathLocks:
    """One asyncio lock per (user, thread, host path), created on demand and dropped when idle."""

    def __init__(self) -> None:
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._users: defaultdict[str, int] = defaultdict(int)

    def hold(self, key: str) -> _Held:
        """`async with locks.hold(key):` serializes everything holding the same key."""
        return _Held(self, key)


class _Held:
    def __init__(self, owner: PathLocks, key: str) -> None:
        self.owner = owner
        self.key = key

    async def __aenter__(self) -> None:
        self.owner._users[self.key] += 1
        await self.owner._locks[self.key].acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.owner._locks[self.key].release()
        self.owner._users[self.key] -= 1
        if self.owner._users[self.key] == 0:
            del self.owner._users[self.key]
            del self.owner._locks[self.key]


def read_file(
    fs: ThreadFS, path: str, start: int | None, end: int | None, config: SandboxConfig
) -> tuple[str, int, int]:
    """`(content, total_lines, truncated_chars)`; lines are 1-based and inclusive."""
    location = fs.locate(path)
    with fdpath.opened(location) as (fd, info):
        fdpath.require_file(location, info)
        text = fdpath.read_all(fd).decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    if start is not None or end is not None:
        first = (start or 1) - 1
        last = end or len(lines)
        if first >= len(lines) and lines:
            raise InvalidRequest(f"{path} has {len(lines)} lines; start_line {start} is past the end")
        text = "".join(lines[first:last])
    content, cut = truncate(text, config.max_read_chars, "file")
    return content, len(lines), cut


MAX_BINARY_BYTES = 8 * 1024 * 1024


def read_binary(fs: ThreadFS, path: str) -> tuple[str, str]:
    """`(base64 content, content type)` of a whole file (images for vision models)."""
    location = fs.locate(path)
    with fdpath.opened(location) as (fd, info):
        fdpath.require_file(location, info)
        if info.st_size > MAX_BINARY_BYTES:
            raise TooLarge(f"{path} is {info.st_size} bytes; at most {MAX_BINARY_BYTES} can be read whole")
        data = fdpath.read_all(fd)
    content_type = mimetypes.guess_type(location.name)[0] or "application/octet-stream"
    return base64.b64encode(data).decode("ascii"), content_type


def write_file(
    fs: ThreadFS, path: str, content: str, append: bool, config: SandboxConfig, owner: tuple[int, int] | None
) -> int:
    """Write (or append to) a file, creating its folders; returns the bytes written."""
    data = content.encode("utf-8")
    location = fs.locate(path, write=True)
    if len(data) > config.max_write_bytes:
        raise TooLarge(f"{len(data)} bytes is over the {config.max_write_bytes}-byte limit for one file")
    with fdpath.parent_of(location, create=True, owner=owner) as parent:
        if not append:
            fdpath.replace_file(parent, location, data, owner)
            return len(data)
        fd = fdpath.open_at(parent, location, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            info = os.fstat(fd)
            fdpath.require_file(location, info)
            if len(data) + info.st_size > config.max_write_bytes:
                raise TooLarge(
                    f"{len(data) + info.st_size} bytes is over the "
                    f"{config.max_write_bytes}-byte limit for one file"
                )
            fdpath.write_all(fd, data)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)
    return len(data)


def list_dir(fs: ThreadFS, path: str, max_depth: int) -> tuple[str, list[str]]:
    """A tree (2 levels by default), hidden files left out, like `ls` for the model."""
    location = fs.locate(path)
    lines = [path.rstrip("/") + "/"]
    entries: list[str] = []
    with fdpath.opened(location) as (fd, info):
        if not stat.S_ISDIR(info.st_mode):
            raise InvalidRequest(f"{path} is a file; read it with read_file")
        with contextlib.closing(fdpath.walk(fd, max_depth)) as walk:
            for entry in walk:
                if len(entries) >= MAX_LIST_ENTRIES:
                    break
                slash = "/" if entry.is_dir else ""
                entries.append(location.child(*entry.parts).virtual + slash)
                lines.append(f"{'  ' * len(entry.parts)}{entry.name}{slash}")
    if len(entries) >= MAX_LIST_ENTRIES:
        lines.append(f"  [... more than {MAX_LIST_ENTRIES} entries; list a subdirectory ...]")
    return "\n".join(lines), entries


def str_replace(
    fs: ThreadFS,
    path: str,
    old: str,
    new: str,
    replace_all: bool,
    config: SandboxConfig,
    owner: tuple[int, int] | None,
) -> int:
    if not old:
        raise InvalidRequest("old_str must not be empty")
    location = fs.locate(path, write=True)
    with fdpath.parent_of(location) as parent:
        fd = fdpath.open_at(parent, location, os.O_RDONLY)
        try:
            info = os.fstat(fd)
            fdpath.require_file(location, info)
            raw = fdpath.read_all(fd)
        finally:
            os.close(fd)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"{path} is not UTF-8 text; edit it with bash") from None
        count = text.count(old)
        if count == 0:
            raise Conflict(f"old_str was not found in {path}; read the file and copy the text exactly")
        if count > 1 and not replace_all:
            raise Conflict(
                f"old_str appears {count} times in {path}; add context to make it unique, or set replace_all"
            )
        updated = (text.replace(old, new) if replace_all else text.replace(old, new, 1)).encode("utf-8")
        if len(updated) > config.max_write_bytes:
            raise TooLarge(f"the result would be over the {config.max_write_bytes}-byte limit")
        fdpath.replace_file(parent, location, updated, owner, mode=stat.S_IMODE(info.st_mode))
    return count if replace_all else 1


def _glob_matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """`**` is any number of directories, other segments match one name each (fnmatch, case-sensitive)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_glob_matches(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _glob_matches(rest, parts[1:])


def glob(fs: ThreadFS, pattern: str, path: str) -> tuple[list[str], bool]:
    if not pattern or pattern.startswith("/") or ".." in PurePosixPath(pattern).parts:
        raise InvalidRequest("the pattern must be relative to the path, e.g. **/*.py")
    segments = PurePosixPath(pattern).parts
    location = fs.locate(path)
    # Like pathlib: a pattern ending in ** names directories only (the start included).
    dirs_only = segments[-1] == "**"
    depth = fdpath.MAX_DEPTH if "**" in segments else len(segments)
    found: list[str] = []
    try:
        with fdpath.opened(location) as (fd, info):
            if not stat.S_ISDIR(info.st_mode):
                raise NotFound(f"{path} is not a directory")
            if dirs_only and _glob_matches(segments, ()):
                found.append(location.virtual)
            with contextlib.closing(fdpath.walk(fd, depth)) as walk:
                for entry in walk:
                    if dirs_only and not entry.is_dir:
                        continue
                    if _glob_matches(segments, entry.parts):
                        found.append(location.child(*entry.parts).virtual)
                        if len(found) >= MAX_GLOB_RESULTS:
                            return found, True
    except NotFound:
        raise NotFound(f"{path} is not a directory") from None
    return found, False
