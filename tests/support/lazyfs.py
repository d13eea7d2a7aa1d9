"""A filesystem that forgets what was not fsynced when the power is cut (after Jepsen's LazyFS).

Mounted over a directory (FUSE, through mfusepy), it passes every operation through to a
backing directory, and remembers, for each file written since its last fsync, what an fsync
would have made durable: its size then, and the original bytes of every page overwritten
since. "Cutting the power" (`cut` on the control socket, sent once the processes using the
mount are dead) puts every such file back as it was at its last fsync: what was written but
never synced is gone, as after a real power loss with the page cache lost. Metadata (creating,
renaming, removing files) counts as durable at once, as on a journalling filesystem; a file
created and never synced comes back empty.

SIGKILL alone cannot show this: the page cache survives the process, so the data would be read
back. Under this layer it is not.

Run as its own process (`python -m tests.support.lazyfs BACKING MOUNTPOINT CONTROL`), or through
`LazyFS` from a test: `async with LazyFS(backing, mountpoint) as fs: ... await fs.cut()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE = 4096


@dataclass
class _Unsynced:
    """A file written since its last fsync: what that fsync left on disk."""

    synced_size: int
    pages: dict[int, bytes] = field(default_factory=dict)  # page index -> its bytes at the last fsync


@dataclass
class CutReport:
    files: int  # files put back to their last fsync
    bytes_dropped: int  # bytes written since then, now gone


def _fuse_classes() -> tuple[type, type]:
    import mfusepy

    return mfusepy.FUSE, mfusepy.Operations


def _operations(backing: Path) -> Any:
    """The passthrough operations over `backing` (built lazily: mfusepy loads libfuse on import)."""
    _, operations = _fuse_classes()

    class Lazy(operations):  # type: ignore[misc, valid-type]
        use_ns = True

        def __init__(self) -> None:
            self.root = str(backing)
            self.guard = threading.Lock()
            self.unsynced: dict[int, _Unsynced] = {}  # by inode: renames keep it
            self.inode_of: dict[int, int] = {}  # open handle -> inode

        def _path(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        # -------------------------------------------------------------- forgetting

        def _track(self, fh: int, created: bool = False) -> tuple[int, _Unsynced]:
            inode = self.inode_of.get(fh) or os.fstat(fh).st_ino
            state = self.unsynced.get(inode)
            if state is None:
                # First write since the last fsync: everything the file holds now is durable
                # (or, for a file just created, nothing is).
                state = _Unsynced(synced_size=0 if created else os.fstat(fh).st_size)
                self.unsynced[inode] = state
            return inode, state

        def _keep_originals(self, fh: int, state: _Unsynced, start: int, end: int) -> None:
            """Save the synced bytes of the pages in [start, end) before they are changed."""
            end = min(end, state.synced_size)
            if end <= start:
                return  # all beyond what was synced: cutting the file back drops it
            for page in range(start // PAGE, (end - 1) // PAGE + 1):
                if page not in state.pages:
                    offset = page * PAGE
                    state.pages[page] = os.pread(fh, min(PAGE, state.synced_size - offset), offset)

        def writeback(self) -> int:
            """Make everything written so far durable, as the kernel's writeback does in time;
            returns how many files it took."""
            with self.guard:
                files = len(self.unsynced)
                self.unsynced.clear()
                return files

        def cut(self) -> CutReport:
            """Put every file written since its last fsync back as that fsync left it."""
            with self.guard:
                paths: dict[int, str] = {}
                for directory, _, files in os.walk(self.root):
                    for name in files:
                        full = os.path.join(directory, name)
                        with contextlib.suppress(OSError):
                            paths[os.lstat(full).st_ino] = full
                report = CutReport(files=0, bytes_dropped=0)
                for inode, state in self.unsynced.items():
                    path = paths.get(inode)
                    if path is None:
                        continue  # removed since: nothing to put back
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        size = os.fstat(fd).st_size
                        dropped = max(0, size - state.synced_size)
                        for page, original in state.pages.items():
                            os.pwrite(fd, original, page * PAGE)
                            dropped += len(original)
                        os.ftruncate(fd, state.synced_size)
                    finally:
                        os.close(fd)
                    report.files += 1
                    report.bytes_dropped += dropped
                self.unsynced.clear()
                return report

        # -------------------------------------------------------------- files

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino")
            found = {key: getattr(st, key) for key in keys}
            found.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return found

        def open(self, path: str, flags: int) -> int:
            fh = os.open(self._path(path), flags & ~os.O_APPEND)
            self.inode_of[fh] = os.fstat(fh).st_ino
            return fh

        def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
            full = self._path(path)
            existed = os.path.exists(full)
            fh = os.open(full, (flags | os.O_CREAT) & ~os.O_APPEND, mode)
            self.inode_of[fh] = os.fstat(fh).st_ino
            if not existed:
                with self.guard:
                    self._track(fh, created=True)
            return fh

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self.guard:
                _, state = self._track(fh)
                self._keep_originals(fh, state, offset, offset + len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            opened = fh is None
            handle = os.open(self._path(path), os.O_RDWR) if opened else fh
            assert handle is not None
            try:
                with self.guard:
                    _, state = self._track(handle)
                    self._keep_originals(handle, state, length, state.synced_size)
                    os.ftruncate(handle, length)
            finally:
                if opened:
                    os.close(handle)
            return 0

        def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
            if mode:
                return -errno.EOPNOTSUPP
            with self.guard:
                self._track(fh)
                os.posix_fallocate(fh, offset, size)
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            if os.environ.get("LAZYFS_DEBUG"):
                print("fsync", path, fh, self.inode_of.get(fh), file=sys.stderr, flush=True)
            with self.guard:
                self.unsynced.pop(self.inode_of.get(fh) or os.fstat(fh).st_ino, None)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> int:
            self.inode_of.pop(fh, None)
            os.close(fh)
            return 0

        # -------------------------------------------------------------- the rest passes through

        def access(self, path: str, amode: int) -> int:
            return 0 if os.access(self._path(path), amode) else -errno.EACCES

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._path(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._path(path), uid, gid)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._path(path), mode)
            return 0

        def rmdir(self, path: str) -> int:
            os.rmdir(self._path(path))
            return 0

        def unlink(self, path: str) -> int:
            os.unlink(self._path(path))
            return 0

        def rename(self, old: str, new: str) -> int:
            os.rename(self._path(old), self._path(new))
            return 0

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._path(path))]

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(self._path(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag")
            return {key: getattr(st, key) for key in (*keys, "f_frsize", "f_namemax")}

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(self._path(path), ns=times) if times else os.utime(self._path(path))
            return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            return 0

    return Lazy()


def _serve_control(ops: Any, control: str) -> None:
    """Answer `cut` on the control socket with `<files> <bytes dropped>`, `writeback` with `<files> 0`."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(control)
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn:
            command = conn.recv(64).strip()
            if command == b"cut":
                report = ops.cut()
                conn.sendall(f"{report.files} {report.bytes_dropped}\n".encode())
            elif command == b"writeback":
                conn.sendall(f"{ops.writeback()} 0\n".encode())


def main(argv: list[str]) -> None:
    backing, mountpoint, control = argv
    fuse, _ = _fuse_classes()
    ops = _operations(Path(backing))
    threading.Thread(target=_serve_control, args=(ops, control), daemon=True).start()
    # direct_io: every read reaches the layer, so nothing the kernel cached survives a cut.
    fuse(
        ops,
        mountpoint,
        foreground=True,
        direct_io=True,
        attr_timeout=0,
        entry_timeout=0,
        max_threads=16,
        fsname="lazyfs",
    )


def unavailable() -> str | None:
    """Why this machine cannot run the layer (None: it can)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse cannot be opened by this user"
    try:
        _fuse_classes()
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse: {exc}"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None and os.geteuid() != 0:
        return "no fusermount to mount as a user"
    return None


class LazyFS:
    """The layer in a child process, mounted at `mountpoint` over `backing` until closed."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.control = str(backing.parent / f".{backing.name}.lazyfs.sock")
        self.cuts: list[CutReport] = []
        self._proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> LazyFS:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.control)
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.lazyfs",
            str(self.backing),
            str(self.mountpoint),
            self.control,
            stdin=asyncio.subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not self._mounted():
            if self._proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"lazyfs did not mount at {self.mountpoint} (exit {self._proc.returncode})"
                )
            await asyncio.sleep(0.05)
        return self

    def _mounted(self) -> bool:
        return os.path.ismount(self.mountpoint) and os.path.exists(self.control)

    async def cut(self) -> CutReport:
        """Drop what was not fsynced. Only while nothing uses the mount: kill its users first."""
        report = await self._ask(b"cut")
        self.cuts.append(report)
        return report

    async def writeback(self) -> int:
        """Make what was written so far durable (time passing: the kernel writes dirty pages back
        within half a minute). For what is older than a test's subject, such as streams created at
        start-up: nats-server does not fsync a new stream's metadata. Returns how many files."""
        return (await self._ask(b"writeback")).files

    async def _ask(self, command: bytes) -> CutReport:
        reader, writer = await asyncio.open_unix_connection(self.control)
        writer.write(command + b"\n")
        await writer.drain()
        files, dropped = (await asyncio.wait_for(reader.readline(), 60)).split()
        writer.close()
        return CutReport(files=int(files), bytes_dropped=int(dropped))

    async def __aexit__(self, *exc: object) -> None:
        unmount = shutil.which("fusermount3") or shutil.which("fusermount")
        mountpoint = str(self.mountpoint)
        command = [unmount, "-u", "-z", mountpoint] if unmount else ["umount", "-l", mountpoint]
        done = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await done.wait()
        if self._proc is not None:
            try:
                await asyncio.wait_for(self._proc.wait(), 10)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.control)


if __name__ == "__main__":
    main(sys.argv[1:])
