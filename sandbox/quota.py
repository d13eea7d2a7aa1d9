"""A thread's disk quota: what its files take (workspace, outputs, uploads and commands' /tmp).

Not every host has file system quotas, so the broker counts: before a write,
after a command, and every `CHECK_SECONDS` while a command runs (a command that
takes the thread over `sandbox.max_thread_mb` is stopped with a message saying
so). A thread over its quota gets no new writes through the file tools, and its
commands run with a file size limit of 0 (bwrap): they can delete files, not
grow them.

Counting walks the thread's directory the way `sandbox.fdpath` does (each name
opened O_NOFOLLOW relative to its directory), hidden names included, and counts
blocks on disk (a sparse file takes what it uses), each inode once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox.paths import ThreadFS

CHECK_SECONDS = 1.0
MAX_DEPTH = 256
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def thread_root(fs: ThreadFS) -> Path:
    """The thread's own directory: user-data (the mounts) and tmp (commands' /tmp)."""
    return fs.base.parent


def tmp_root(fs: ThreadFS) -> Path:
    return thread_root(fs) / "tmp"


def usage(fs: ThreadFS) -> int:
    """Bytes on disk under the thread's directory."""
    try:
        fd = os.open(thread_root(fs), _DIR_FLAGS)
    except OSError:
        return 0
    seen: set[tuple[int, int]] = set()
    try:
        return _count(fd, 0, seen)
    finally:
        os.close(fd)


def _count(dir_fd: int, depth: int, seen: set[tuple[int, int]]) -> int:
    total = 0
    try:
        with os.scandir(dir_fd) as listing:
            names = [entry.name for entry in listing]
    except OSError:
        return 0
    for name in names:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
        if stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                total += _count(child, depth + 1, seen)
            finally:
                os.close(child)
    return total


def over_quota_message(used: int, quota_mb: float) -> str:
    return (
        f"this thread's files take {used / 1e6:.1f} MB, over its quota of {quota_mb:g} MB "
        "(sandbox.max_thread_mb): delete files (e.g. with rm) before writing more"
    )
