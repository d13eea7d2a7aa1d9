"""Opening what a virtual path names, beneath its mount's root, never through a symlink.

The broker can read and write the host; sandboxed commands can rename, replace
and link anything under the mounts at any moment. So nothing here checks a path
and opens it afterwards (the check-then-open race of issue #10). The mount's
root is opened once, and every name below it is opened relative to the
descriptor of the directory before, with O_NOFOLLOW: the kernel refuses a
symlink at the moment of the open, whatever it became a microsecond earlier.

A symlink anywhere in a path is refused, even one pointing inside the mount:
what it points to can change between two calls, and following links "only if
they stay inside" is the check this module exists to avoid. Commands can still
use their links (they run inside the sandbox, where a link cannot lead out).
Walks (list, glob, grep, publishing outputs) list a directory through its
descriptor and open each subdirectory the same way, so an entry swapped for a
symlink after the listing is skipped, never entered.

Files are opened O_NONBLOCK and must be regular files (a FIFO cannot hang the
broker); writes replace the file atomically through a new temporary file in the
same directory descriptor, so a reader never sees half a write.

Why a walk of openat() calls and not openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS):
the walk has the same guarantee on every kernel and Python (openat2 needs Linux
5.6 and a raw syscall through ctypes), one code path is the one the race tests
exercise, and it can say which component was a symlink. It costs one open per
path component.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from sandbox.errors import InvalidRequest, NotAllowed, NotFound, SandboxError
from sandbox.paths import Location

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Deeper trees are not walked: each level holds a descriptor open.
MAX_DEPTH = 64


# ------------------------------------------------------------------ errors


def _symlink(location: Location, at: Location) -> NotAllowed:
    where = "" if at == location else f" ({at.virtual} is one)"
    return NotAllowed(
        f"{location.virtual} goes through a symlink{where}; the file tools do not follow symlinks, "
        f"which could lead outside {location.mount.virtual}. Use the path it points to, or bash"
    )


def _failure(exc: OSError, location: Location, at: Location, dir_fd: int, *, writing: bool) -> SandboxError:
    """The error the model gets for a failed open of `at` (a component of `location`)."""
    code = exc.errno
    if code == errno.ELOOP:
        return _symlink(location, at)
    if code == errno.ENOTDIR and at.parts:
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(at.parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode):
                return _symlink(location, at)
        if writing:
            return InvalidRequest(f"{at.virtual} is a file, not a directory")
        return NotFound(f"{location.virtual} does not exist ({at.virtual} is a file)")
    if code == errno.ENOENT:
        return NotFound(f"{location.virtual} does not exist")
    if code in (errno.EISDIR, errno.ENOTEMPTY):
        return InvalidRequest(f"{location.virtual} is a directory")
    if code == errno.ENXIO:
        return InvalidRequest(f"{location.virtual} is not a regular file")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return NotAllowed(f"{location.virtual}: permission denied")
    if code == errno.ENAMETOOLONG:
        return InvalidRequest(f"{location.virtual}: a name in the path is too long")
    # Never the host path: exc's own message would carry it.
    return SandboxError(f"{location.virtual}: {exc.strerror or type(exc).__name__}")


def require_file(location: Location, info: os.stat_result) -> None:
    """Refuse anything but a regular file (a directory gets the hint to list it)."""
    if stat.S_ISDIR(info.st_mode):
        raise InvalidRequest(f"{location.virtual} is a directory; list it with ls")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidRequest(f"{location.virtual} is not a regular file")


# ------------------------------------------------------------------ opening


def open_root(location: Location) -> int:
    """A descriptor of the mount's root (made by the broker; commands cannot replace it)."""
    try:
        return os.open(location.mount.host, DIR_FLAGS)
    except FileNotFoundError:
        raise NotFound(f"{location.mount.virtual} does not exist") from None


def _descend(
    dir_fd: int, location: Location, depth: int, *, create: bool, owner: tuple[int, int] | None
) -> int:
    at = Location(location.mount, location.parts[: depth + 1])
    name = location.parts[depth]
    made = False
    if create:
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)  # never follows: an existing symlink is EEXIST
            made = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise _failure(exc, location, at, dir_fd, writing=True) from None
    try:
        child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _failure(exc, location, at, dir_fd, writing=create) from None
    if made and owner is not None:
        try:
            os.fchown(child, *owner)
        except BaseException:
            os.close(child)
            raise
    return child


@contextlib.contextmanager
def parent_of(
    location: Location, *, create: bool = False, owner: tuple[int, int] | None = None
) -> Iterator[int]:
    """A descriptor of the directory holding `location` (created, with its parents, if `create`)."""
    if not location.parts:
        raise InvalidRequest(f"{location.virtual} is a directory")
    fd = open_root(location)
    try:
        for depth in range(len(location.parts) - 1):
            child = _descend(fd, location, depth, create=create, owner=owner)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_at(dir_fd: int, location: Location, flags: int, mode: int = 0o666) -> int:
    """Open `location`'s last name in `dir_fd` without following a symlink or blocking on a FIFO."""
    try:
        return os.open(location.name, flags | _FILE_FLAGS, mode, dir_fd=dir_fd)
    except OSError as exc:
        raise _failure(exc, location, location, dir_fd, writing=bool(flags & os.O_CREAT)) from None


@contextlib.contextmanager
def opened(location: Location) -> Iterator[tuple[int, os.stat_result]]:
    """`location` opened read-only (a file or a directory), with what it is."""
    if location.parts:
        with parent_of(location) as parent:
            fd = open_at(parent, location, os.O_RDONLY)
    else:
        fd = open_root(location)
    try:
        yield fd, os.fstat(fd)
    finally:
        os.close(fd)


def read_all(fd: int) -> bytes:
    with open(fd, "rb", closefd=False) as handle:
        return handle.read()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_file(
    dir_fd: int,
    location: Location,
    data: bytes,
    owner: tuple[int, int] | None,
    *,
    mode: int | None = None,
) -> None:
    """Make `location` (in `dir_fd`) a regular file holding `data`, atomically.

    A new file is written under a temporary name in the same directory and renamed
    over the old one; the rename replaces a directory entry and follows nothing.
    `mode` keeps an existing file's permissions (an edited script stays executable).
    """
    name = location.name
    try:
        existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise _failure(exc, location, location, dir_fd, writing=True) from None
    if existing is not None:
        if stat.S_ISLNK(existing.st_mode):
            raise _symlink(location, location)
        if stat.S_ISDIR(existing.st_mode):
            raise InvalidRequest(f"{location.virtual} is a directory")
        if not stat.S_ISREG(existing.st_mode):
            raise InvalidRequest(f"{location.virtual} is not a regular file")
        if mode is None:
            mode = stat.S_IMODE(existing.st_mode)
    temporary = f".antler-{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temporary, flags, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        raise _failure(exc, location, location, dir_fd, writing=True) from None
    try:
        try:
            write_all(fd, data)
            if owner is not None:
                os.fchown(fd, *owner)
            if mode is not None:
                os.fchmod(fd, mode & 0o777)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise _failure(exc, location, location, dir_fd, writing=True) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


# ------------------------------------------------------------------ walking


@dataclass(frozen=True)
class Entry:
    """One name met in a walk: where it is (below the walk's start) and what it was when listed."""

    parts: tuple[str, ...]
    is_dir: bool
    is_file: bool
    dir_fd: int  # the directory holding it, open while the walk is at this entry

    @property
    def name(self) -> str:
        return self.parts[-1]


def walk(
    dir_fd: int, max_depth: int = MAX_DEPTH, parts: tuple[str, ...] = ()
) -> Generator[Entry, None, None]:
    """Every entry under `dir_fd`, in sorted order, parents before children, hidden names left out.

    Symlinks are listed (a name is harmless) but never entered; a directory is entered
    by opening it O_NOFOLLOW relative to its parent, so one replaced by a symlink after
    the listing is skipped. Unreadable directories are skipped too.
    """
    try:
        with os.scandir(dir_fd) as listing:
            found = sorted(
                (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                for e in listing
                if not e.name.startswith(".")
            )
    except OSError:
        return
    for name, is_dir, is_file in found:
        entry = Entry((*parts, name), is_dir, is_file, dir_fd)
        yield entry
        if is_dir and len(entry.parts) < max_depth:
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue  # gone, or no longer a directory
            try:
                yield from walk(child, max_depth, entry.parts)
            finally:
                os.close(child)


@contextlib.contextmanager
def open_entry(entry: Entry) -> Iterator[tuple[int, os.stat_result] | None]:
    """A regular file met in a walk, opened safely; None if it is not one (any more)."""
    try:
        fd = os.open(entry.name, os.O_RDONLY | _FILE_FLAGS, dir_fd=entry.dir_fd)
    except OSError:
        yield None
        return
    try:
        info = os.fstat(fd)
        yield (fd, info) if stat.S_ISREG(info.st_mode) else None
    finally:
        os.close(fd)
