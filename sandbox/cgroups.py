"""Per-command cgroups (memory, processes, CPU) where the host delegates cgroup v2 to the broker.

Each command gets `<broker's cgroup>/cmd-<id>` with `memory.max` =
`sandbox.memory_mb` (no swap, `memory.oom.group`: the kernel kills the whole
group at once), `pids.max` = `sandbox.max_processes` and `cpu.max` =
`sandbox.cpu_cores`, joins it before it starts (a shell writes its own pid to
`cgroup.procs`, then execs the command), and the group is killed and removed
when the command ends.

That needs a unified (v2) hierarchy, the broker's own cgroup writable, and no
other process in it (cgroup v2 lets a group with processes have no controlled
children): the broker moves itself into a leaf `broker` and enables the
controllers on its cgroup. A broker run as a systemd service with
`Delegate=yes`, or alone in a container with a private cgroup namespace, has
that. Where the host does not, `start()` says why and `sandbox.limits` tries
the next mechanism.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from pathlib import Path

from sandbox.mechanism import CommandGroup, Limits, Mechanism

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
JOIN_FAILED = 125  # the exit status of a command that could not join its group (it never ran)


def own_cgroup(proc: Path = Path("/proc/self/cgroup")) -> str | None:
    """This process's cgroup v2 path (the `0::` line), or None on a v1-only host."""
    try:
        for line in proc.read_text(encoding="ascii").splitlines():
            if line.startswith("0::"):
                return line[3:] or "/"
    except OSError:
        return None
    return None


def joining(procs_files: list[Path], argv: list[str]) -> list[str]:
    """`argv`, run by a shell that first writes its own pid into each `cgroup.procs` file, then execs
    it. A group it cannot join fails the command (exit 125) rather than run it without its limits."""
    if not procs_files:
        return argv
    script = (
        'while [ "$1" != -- ]; do { echo $$ > "$1"; } 2>/dev/null || '
        '{ echo "sandbox: the command could not join its cgroup ($1); it did not run" >&2; exit 125; }; '
        'shift; done; shift; exec "$@"'
    )
    return ["/bin/sh", "-c", script, "sh", *map(str, procs_files), "--", *argv]


def remove_dir(group: Path, kill: object = None) -> bool:
    """rmdir a cgroup once its processes are gone (they take a moment to leave after a kill)."""
    for _ in range(200):
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if callable(kill):
                kill()
            time.sleep(0.01)
    log.warning("sandbox: the cgroup %s could not be removed", group)
    return False


class V2Group(CommandGroup):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def wrap(self, argv: list[str]) -> list[str]:
        return joining([self.path / "cgroup.procs"], argv)

    def poll(self) -> bool:
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for passing `memory.max`."""
        try:
            for line in (self.path / "memory.events").read_text(encoding="ascii").splitlines():
                name, _, count = line.partition(" ")
                if name == "oom_kill":
                    return int(count)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1", encoding="ascii")

    def close(self) -> None:
        self.kill()
        if not self.over_memory and self.oom_kills() > 0:
            self.over_memory = True
        with contextlib.suppress(OSError, ValueError):
            self.peak_bytes = int((self.path / "memory.peak").read_text(encoding="ascii"))
        remove_dir(self.path)


class CgroupV2(Limits):
    """The broker's cgroup (when it can have children with controllers) and its commands' groups."""

    mechanism: Mechanism = "cgroup2"

    def __init__(self, memory_mb: int, max_processes: int, cpu_cores: float, root: Path = ROOT) -> None:
        super().__init__(memory_mb, max_processes, cpu_cores)
        self.root = root
        self.base: Path | None = None

    def describe(self) -> str:
        return (
            f"each command's processes together are held to {self.memory_mb} MB of memory, {self.pids} "
            f"processes and {self.cpu_cores:g} CPUs by a cgroup v2 group of its own under {self.base}"
        )

    @property
    def caps(self) -> dict[str, str]:
        return {"memory": "cgroup v2", "processes": "cgroup v2", "cpu": "cgroup v2"}

    def start(self) -> str | None:
        if not (self.root / "cgroup.controllers").is_file():
            return f"{self.root} is not a cgroup v2 (unified) hierarchy on this host"
        own = own_cgroup()
        if own is None:
            return "this process is in no cgroup v2 group"
        base = self.root / own.lstrip("/")
        if base.name == "broker":  # this process moved itself into its leaf before (a second provider)
            base = base.parent
        try:
            available = (base / "cgroup.controllers").read_text(encoding="ascii").split()
        except OSError as exc:
            return f"the broker's cgroup {own} cannot be read: {exc}"
        missing = [c for c in CONTROLLERS if c not in available]
        if missing:
            return f"the broker's cgroup {own} has no {', '.join(missing)} controller delegated to it"
        if not os.access(base, os.W_OK):
            return f"the broker's cgroup {own} is not writable by this user (not delegated)"
        try:
            leaf = base / "broker"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")  # moves the whole process
            enable = " ".join(f"+{c}" for c in CONTROLLERS)
            (base / "cgroup.subtree_control").write_text(enable, encoding="ascii")
        except OSError as exc:
            return (
                f"the controllers cannot be enabled below the broker's cgroup {own} ({exc.strerror}); other "
                "processes share it: run the broker in a cgroup of its own (systemd Delegate=yes, or a "
                "container with a private cgroup namespace)"
            )
        self.base = base
        return None

    def create(self) -> V2Group:
        if self.base is None:
            raise RuntimeError("cgroup v2 limits were not started")
        group = self.base / f"cmd-{secrets.token_hex(6)}"
        group.mkdir()
        try:
            (group / "memory.max").write_text(str(self.memory), encoding="ascii")
            with contextlib.suppress(FileNotFoundError):
                (group / "memory.swap.max").write_text("0", encoding="ascii")
            with contextlib.suppress(FileNotFoundError):  # kernels before 4.19 kill one process only
                (group / "memory.oom.group").write_text("1", encoding="ascii")
            (group / "pids.max").write_text(str(self.pids), encoding="ascii")
            period = 100_000
            (group / "cpu.max").write_text(f"{int(self.cpu_cores * period)} {period}", encoding="ascii")
        except OSError:
            remove_dir(group)
            raise
        return V2Group(group)
