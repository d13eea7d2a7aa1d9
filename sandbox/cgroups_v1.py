"""Per-command groups in the cgroup v1 controllers, for hosts with no delegated v2 hierarchy.

Many container hosts, CI runners and older distributions mount the v1
controllers (`/sys/fs/cgroup/memory`, `.../pids`, `.../cpu`) and no usable
v2 hierarchy. There, each command gets a group of its own in each of those
controllers, under `<broker's group>/antler-sandbox-<broker pid>`:
`memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so swap counts
too, where the kernel accounts it) = `sandbox.memory_mb`, `pids.max` =
`sandbox.max_processes`, `cpu.cfs_quota_us` = `sandbox.cpu_cores`. Memory is
required; processes and CPU are held where their controller is mounted. The
command joins its groups before it starts (`cgroups.joining`).

v1 kills one process when a group passes its memory limit (there is no
`memory.oom.group`): the watcher thread sees the group's `oom_kill` count
rise and kills the rest of the command. v1 has no `cgroup.kill` either: its
processes are killed one by one until the group is empty. Groups left by a
broker that died are removed at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
from pathlib import Path

from sandbox.cgroups import joining, remove_dir
from sandbox.mechanism import CommandGroup, Limits, Mechanism

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "antler-sandbox-"


def v1_hierarchies(
    mountinfo: Path = Path("/proc/self/mountinfo"), cgroup: Path = Path("/proc/self/cgroup")
) -> dict[str, Path]:
    """Controller -> the directory of this process's own group in that v1 hierarchy, for the
    controllers mounted here and holding this process."""
    mounts: dict[str, tuple[Path, str]] = {}
    try:
        for line in mountinfo.read_text(encoding="utf-8").splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) < 5 or len(tail) < 3 or tail[0] != "cgroup":
                continue
            for option in tail[2].split(","):
                mounts.setdefault(option, (Path(fields[4]), fields[3]))
    except OSError:
        return {}
    found: dict[str, Path] = {}
    try:
        lines = cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller in mounts:
                mountpoint, root = mounts[controller]
                relative = path[len(root) :] if path.startswith(root) and root != "/" else path
                found[controller] = mountpoint / relative.lstrip("/")
    return found


def _procs(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text(encoding="ascii").split()]
    except (OSError, ValueError):
        return []


def _kill_all(group: Path) -> None:
    for pid in _procs(group):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class V1Group(CommandGroup):
    def __init__(self, paths: dict[str, Path]) -> None:
        super().__init__()
        self.paths = paths  # controller -> this command's group in it
        self.memory = paths["memory"]

    def wrap(self, argv: list[str]) -> list[str]:
        return joining([path / "cgroup.procs" for path in self.paths.values()], argv)

    def oom_kills(self) -> int:
        try:
            text = (self.memory / "memory.oom_control").read_text(encoding="ascii")
        except OSError:
            return 0
        values = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
        with contextlib.suppress(ValueError):
            if "oom_kill" in values:  # kernels from 4.13
                return int(values["oom_kill"])
            return int(values.get("under_oom", "0"))
        return 0

    def poll(self) -> bool:
        return self.oom_kills() > 0

    def kill(self) -> None:
        _kill_all(self.memory)

    def close(self) -> None:
        self.kill()
        if not self.over_memory and self.oom_kills() > 0:
            self.over_memory = True
        with contextlib.suppress(OSError, ValueError):
            self.peak_bytes = int((self.memory / "memory.max_usage_in_bytes").read_text(encoding="ascii"))
        for path in self.paths.values():
            remove_dir(path, lambda path=path: _kill_all(path))


class CgroupV1(Limits):
    """This broker's groups in the v1 controllers, one per command below them."""

    mechanism: Mechanism = "cgroup1"

    def __init__(
        self,
        memory_mb: int,
        max_processes: int,
        cpu_cores: float,
        hierarchies: dict[str, Path] | None = None,
    ) -> None:
        super().__init__(memory_mb, max_processes, cpu_cores)
        self._hierarchies = hierarchies
        self.bases: dict[str, Path] = {}

    def describe(self) -> str:
        held = [f"{self.memory_mb} MB of memory"]
        if "pids" in self.bases:
            held.append(f"{self.pids} processes")
        if "cpu" in self.bases:
            held.append(f"{self.cpu_cores:g} CPUs")
        rest = [name for name, c in (("processes", "pids"), ("CPU", "cpu")) if c not in self.bases]
        line = (
            f"each command's processes together are held to {', '.join(held)} by cgroup v1 groups of its own "
            f"under {self.bases['memory']}"
        )
        return line + (f"; {' and '.join(rest)} per process only" if rest else "")

    @property
    def caps(self) -> dict[str, str]:
        return {
            "memory": "cgroup v1",
            "processes": "cgroup v1" if "pids" in self.bases else "per process",
            "cpu": "cgroup v1" if "cpu" in self.bases else "per process",
        }

    def start(self) -> str | None:
        hierarchies = self._hierarchies if self._hierarchies is not None else v1_hierarchies()
        if "memory" not in hierarchies:
            return "no cgroup v1 memory controller is mounted here"
        for controller in CONTROLLERS:
            own = hierarchies.get(controller)
            if own is None:
                continue
            self._sweep(own)
            base = own / f"{PREFIX}{os.getpid()}"
            try:
                base.mkdir(exist_ok=True)
            except OSError as exc:
                if controller == "memory":
                    return f"the broker's memory group {own} is not writable ({exc.strerror})"
                log.info("sandbox: no cgroup v1 %s group under %s: %s", controller, own, exc.strerror)
                continue
            self.bases[controller] = base
        try:  # that limits can be written here (a read-only or foreign hierarchy fails now, not per command)
            self.create().close()
        except OSError as exc:
            for base in self.bases.values():
                remove_dir(base)
            self.bases = {}
            return f"a command's memory group cannot be made under {hierarchies['memory']} ({exc})"
        return None

    @staticmethod
    def _sweep(own: Path) -> None:
        """Remove the groups of brokers that died (their pid is gone) and any command left in them."""
        with contextlib.suppress(OSError):
            for stale in own.glob(f"{PREFIX}*"):
                pid = stale.name[len(PREFIX) :]
                if not pid.isdigit() or Path(f"/proc/{pid}").exists():
                    continue
                for child in stale.iterdir():
                    if child.is_dir():
                        remove_dir(child, lambda child=child: _kill_all(child))
                remove_dir(stale, lambda stale=stale: _kill_all(stale))

    def create(self) -> V1Group:
        name = f"cmd-{secrets.token_hex(6)}"
        paths: dict[str, Path] = {}
        try:
            for controller, base in self.bases.items():
                path = base / name
                path.mkdir()
                paths[controller] = path
                if controller == "memory":
                    (path / "memory.limit_in_bytes").write_text(str(self.memory), encoding="ascii")
                    with contextlib.suppress(OSError):  # absent, or refused: swap is not accounted here
                        (path / "memory.memsw.limit_in_bytes").write_text(str(self.memory), encoding="ascii")
                elif controller == "pids":
                    (path / "pids.max").write_text(str(self.pids), encoding="ascii")
                elif controller == "cpu":
                    period, quota = 100_000, int(self.cpu_cores * 100_000)
                    (path / "cpu.cfs_period_us").write_text(str(period), encoding="ascii")
                    (path / "cpu.cfs_quota_us").write_text(str(quota), encoding="ascii")
        except OSError:
            for path in paths.values():
                remove_dir(path)
            raise
        return V1Group(paths)

    def stop(self) -> None:
        """Remove this broker's groups (at exit; commands' groups went with their commands)."""
        for base in self.bases.values():
            with contextlib.suppress(OSError):
                base.rmdir()
