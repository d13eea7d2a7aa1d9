"""A command's memory summed over its process tree, for hosts that give the broker no cgroup.

Every `INTERVAL` seconds the watcher thread (`mechanism.Watcher`) walks the
command's process tree from its first process (`/proc/<pid>/task/*/children`)
and adds up what it holds in memory:

- each process's resident memory (`statm`); only when that passes the limit,
  its proportional share (`smaps_rollup` Pss), so pages shared between the
  command's processes (forked workers, libraries) count once;
- memory files the tree holds open (memfd, tmpfs; each file once), and what
  its sockets and pipes have queued in the kernel (`sandbox.kernelmem`);
- what is stored in the command's own memory filesystems (bwrap's `/dev`);
- System V shared memory segments of its IPC namespace attached by nobody
  (read from inside that namespace, where the broker may enter it: as root).

Past `sandbox.memory_mb` the whole tree is killed. Under bwrap the tree is
the command's PID namespace: a process cannot leave it, an orphan is
adopted inside it. What a command allocates between two looks can pass the
limit for that long (each process is also held to `memory_mb` by prlimit);
other kernel memory (page tables, the kernel's own structures) is not counted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from pathlib import Path

from sandbox.kernelmem import CLONE_NEWIPC, Namespaces, pipe_contents, socket_buffers
from sandbox.mechanism import CommandGroup, Limits, Mechanism

log = logging.getLogger(__name__)

INTERVAL = 0.02
PAGE = os.sysconf("SC_PAGE_SIZE")
_CHILDREN_FILES = Path(f"/proc/self/task/{os.getpid()}/children").exists()


def children(pid: int) -> list[int]:
    """The processes `pid`'s threads started that are still its children."""
    if _CHILDREN_FILES:
        found: list[int] = []
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        for tid in tasks:
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                    found += [int(c) for c in handle.read().split()]
        return found
    return [child for child, parent in _parents().items() if parent == pid]  # a kernel without them


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as handle:
                    stat = handle.read()
                parents[int(name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children(pid)
    return found


def resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def proportional(pid: int) -> int:
    """Its share of the pages it maps (Pss: a page shared by n processes counts 1/n)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return resident(pid)
    return resident(pid)


def descriptors(pids: list[int]) -> tuple[int, set[int], list[str]]:
    """What the processes hold open that is memory: `(bytes in memory files (memfd, /dev/shm), each
    once; socket inodes; one /proc path per pipe)`."""
    seen: set[tuple[int, int]] = set()
    files, sockets, pipes, pipe_inodes = 0, set(), [], set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path)
            except OSError:
                continue
            if target.startswith("socket:["):
                sockets.add(int(target[8:-1]))
            elif target.startswith("pipe:["):
                if target not in pipe_inodes:
                    pipe_inodes.add(target)
                    pipes.append(path)
            elif target.startswith(("/memfd:", "/dev/shm/", "/run/shm/")):
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    files += info.st_blocks * 512
    return files, sockets, pipes


def filesystem_used(pid: int, paths: tuple[str, ...]) -> int:
    """Bytes stored in the filesystems at `paths` as process `pid` sees them (its mount namespace)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.statvfs(f"/proc/{pid}/root{path}")
            total += (info.f_blocks - info.f_bfree) * info.f_frsize
    return total


def unattached_shm(pid: int, namespaces: Namespaces) -> int:
    """Resident bytes of System V segments no process has attached, in `pid`'s IPC namespace (its
    /proc/sysvipc/shm lists the namespace of the thread reading it)."""
    with namespaces.entered(pid, "ipc", CLONE_NEWIPC) as entered:
        if not entered:
            return 0
        try:
            with open("/proc/sysvipc/shm", encoding="ascii") as handle:
                rows = handle.read().splitlines()
        except OSError:
            return 0
    header, total = rows[0].split() if rows else [], 0
    if "nattch" in header and "rss" in header:
        attached, rss = header.index("nattch"), header.index("rss")
        for row in rows[1:]:
            values = row.split()
            with contextlib.suppress(ValueError, IndexError):
                if int(values[attached]) == 0:
                    total += int(values[rss])
    return total


class TreeGroup(CommandGroup):
    """One command watched through its process tree."""

    def __init__(self, limit: int, tmpfs: tuple[str, ...], namespaces: Namespaces) -> None:
        super().__init__()
        self.limit = limit
        self.tmpfs = tmpfs
        self.namespaces = namespaces
        self.root: int | None = None
        self._inner: int | None = None
        self._known: list[int] = []
        self._lock = threading.Lock()

    def started(self, pid: int) -> None:
        self.root = pid

    def measure(self) -> int:
        """What the command's processes hold in memory together now (0 before it started)."""
        if self.root is None:
            return 0
        pids = tree(self.root)
        with self._lock:
            self._known = pids
        files, sockets, pipes = descriptors(pids)
        extra = files + pipe_contents(pipes)
        inner = self._inside(pids)
        extra += socket_buffers(sockets, inner if inner is not None else self.root, self.namespaces)
        if inner is not None:  # the command's own namespaces (bwrap's): never the host's to count
            if self.tmpfs:
                extra += filesystem_used(inner, self.tmpfs)
            extra += unattached_shm(inner, self.namespaces)
        held = sum(resident(pid) for pid in pids) + extra
        if held > self.limit:  # counted again with shared pages shared out, before calling it too much
            held = sum(proportional(pid) for pid in pids) + extra
        self.peak_bytes = max(self.peak_bytes or 0, held)
        self.near_limit = held > self.limit // 2
        return held

    def _inside(self, pids: list[int]) -> int | None:
        """A process of the tree in the command's own mount namespace (bwrap's), not the host's."""
        if self._inner in pids:
            return self._inner
        try:
            host = os.stat(f"/proc/{self.root}/ns/mnt").st_ino
        except OSError:
            return None
        for pid in pids:
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{pid}/ns/mnt").st_ino != host:
                    self._inner = pid
                    return pid
        return None

    def poll(self) -> bool:
        return self.measure() > self.limit

    def kill(self) -> None:
        with self._lock:
            known = list(self._known)
        if self.root is not None:
            known = [*known, *tree(self.root)]
        for pid in known:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self.kill()


class TreeWatch(Limits):
    """No kernel help: the watcher thread sums each command's tree (see the module's docstring)."""

    mechanism: Mechanism = "watch"
    interval = INTERVAL

    def __init__(
        self, memory_mb: int, max_processes: int, cpu_cores: float, *, tmpfs: tuple[str, ...] = ()
    ) -> None:
        super().__init__(memory_mb, max_processes, cpu_cores)
        self.tmpfs = tmpfs
        self.namespaces = Namespaces()

    def start(self) -> str | None:
        return None

    def describe(self) -> str:
        return (
            f"no cgroups here: each command's memory is held to {self.memory_mb} MB for its processes "
            f"together by a watcher that sums its process tree every {INTERVAL:g}s and kills it past that; "
            "processes and CPU are limited per process only"
        )

    @property
    def caps(self) -> dict[str, str]:
        return {"memory": "watcher", "processes": "per process", "cpu": "per process"}

    def create(self) -> TreeGroup:
        return TreeGroup(self.memory, self.tmpfs, self.namespaces)
