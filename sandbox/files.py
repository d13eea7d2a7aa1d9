"""File operations on a thread's virtual paths: read, write, list, str_replace, glob, grep.

They run in a worker thread (disk I/O stays off the event loop). Writers of one
path are serialized by the broker (`PathLocks`), so two concurrent edits never
interleave.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections import defaultdict
from pathlib import Path

from config import SandboxConfig
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


def _chown(path: Path, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        os.chown(path, *owner)


def read_file(
    fs: ThreadFS, path: str, start: int | None, end: int | None, config: SandboxConfig
) -> tuple[str, int, int]:
    """`(content, total_lines, truncated_chars)`; lines are 1-based and inclusive."""
    host = fs.resolve(path)
    if host.is_dir():
        raise InvalidRequest(f"{path} is a directory; list it with ls")
    if not host.is_file():
        raise NotFound(f"{path} does not exist")
    text = host.read_text(encoding="utf-8", errors="replace")
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
    import base64
    import mimetypes

    host = fs.resolve(path)
    if not host.is_file():
        raise NotFound(f"{path} does not exist")
    size = host.stat().st_size
    if size > MAX_BINARY_BYTES:
        raise TooLarge(f"{path} is {size} bytes; at most {MAX_BINARY_BYTES} can be read whole")
    content_type = mimetypes.guess_type(host.name)[0] or "application/octet-stream"
    return base64.b64encode(host.read_bytes()).decode("ascii"), content_type


def write_file(
    fs: ThreadFS, path: str, content: str, append: bool, config: SandboxConfig, owner: tuple[int, int] | None
) -> int:
    data = content.encode("utf-8")
    host = fs.resolve(path, write=True)
    existing = host.stat().st_size if append and host.is_file() else 0
    if len(data) + existing > config.max_write_bytes:
        raise TooLarge(
            f"{len(data) + existing} bytes is over the {config.max_write_bytes}-byte limit for one file"
        )
    if host.is_dir():
        raise InvalidRequest(f"{path} is a directory")
    created = []
    parent = host.parent
    while not parent.exists():
        created.append(parent)
        parent = parent.parent
    host.parent.mkdir(parents=True, exist_ok=True)
    for directory in created:
        _chown(directory, owner)
    with host.open("ab" if append else "wb") as handle:
        handle.write(data)
    _chown(host, owner)
    return len(data)


def list_dir(fs: ThreadFS, path: str, max_depth: int) -> tuple[str, list[str]]:
    """A tree (2 levels by default), hidden files left out, like `ls` for the model."""
    host = fs.resolve(path)
    if not host.exists():
        raise NotFound(f"{path} does not exist")
    if not host.is_dir():
        raise InvalidRequest(f"{path} is a file; read it with read_file")
    lines = [path.rstrip("/") + "/"]
    entries: list[str] = []

    def walk(directory: Path, depth: int, indent: str) -> None:
        try:
            children = sorted(p for p in directory.iterdir() if not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            if len(entries) >= MAX_LIST_ENTRIES:
                return
            is_dir = child.is_dir() and not child.is_symlink()
            entries.append(fs.to_virtual(child) + ("/" if is_dir else ""))
            lines.append(f"{indent}{child.name}{'/' if is_dir else ''}")
            if is_dir and depth < max_depth:
                walk(child, depth + 1, indent + "  ")

    walk(host, 1, "  ")
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
    host = fs.resolve(path, write=True)
    if not host.is_file():
        raise NotFound(f"{path} does not exist")
    text = host.read_text(encoding="utf-8")
    count = text.count(old)
    if count == 0:
        raise Conflict(f"old_str was not found in {path}; read the file and copy the text exactly")
    if count > 1 and not replace_all:
        raise Conflict(
            f"old_str appears {count} times in {path}; add context to make it unique, or set replace_all"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    if len(updated.encode("utf-8")) > config.max_write_bytes:
        raise TooLarge(f"the result would be over the {config.max_write_bytes}-byte limit")
    host.write_text(updated, encoding="utf-8")
    _chown(host, owner)
    return count if replace_all else 1


def glob(fs: ThreadFS, pattern: str, path: str) -> tuple[list[str], bool]:
    if not pattern or pattern.startswith("/") or ".." in Path(pattern).parts:
        raise InvalidRequest("the pattern must be relative to the path, e.g. **/*.py")
    base = fs.resolve(path)
    if not base.is_dir():
        raise NotFound(f"{path} is not a directory")
    found: list[str] = []
    for match in sorted(base.glob(pattern)):
        if any(part.startswith(".") for part in match.relative_to(base).parts):
            continue
        found.append(fs.to_virtual(match))
        if len(found) >= MAX_GLOB_RESULTS:
            return found, True
    return found, False


def grep(
    fs: ThreadFS, pattern: str, path: str, file_glob: str | None, ignore_case: bool, max_matches: int
) -> tuple[list[tuple[str, int, str]], bool]:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise InvalidRequest(f"not a valid regular expression: {exc}") from None
    base = fs.resolve(path)
    if not base.exists():
        raise NotFound(f"{path} does not exist")
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    matches: list[tuple[str, int, str]] = []
    for file in files:
        if any(
            part.startswith(".") for part in file.relative_to(base.parent if base.is_file() else base).parts
        ):
            continue
        if file_glob and not fnmatch.fnmatch(file.name, file_glob):
            continue
        try:
            with file.open(encoding="utf-8", errors="strict") as handle:
                for number, line in enumerate(handle, 1):
                    if regex.search(line):
                        matches.append((fs.to_virtual(file), number, line.rstrip("\n")[:500]))
                        if len(matches) >= max_matches:
                            return matches, True
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not what grep is for
    return matches, False
