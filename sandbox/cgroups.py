"""Per-command cgroups (memory, processes, CPU) where the host delegates cgroup v2 to the broker.

`prlimit` limits each process of a command; six processes of 800 MB each still
took 5 GB (issue #27). A cgroup limits the command's processes together: each
command gets `<broker's cgroup>/cmd-<id>` with `memory.max` = `sandbox.memory_mb`
(no swap), `pids.max` = `sandbox.max_processes` and `cpu.max` =
`sandbox.cpu_cores`, joins it before it starts (a shell writes its own pid to
`cgroup.procs`, then execs the command), and the group is killed and removed
when the command ends.

That needs a unified (v2) hierarchy, the broker's own cgroup writable, and no
other process in it (cgroup v2 lets a group with processes have no controlled
children): the broker moves itself into a leaf `broker` and enables the
controllers on its cgroup. A broker run as a systemd service with
`Delegate=yes`, or alone in a container with a private cgroup namespace, has
that. Where the host does not, `Cgroups.start()` says why (logged at start-up,
in the service's metadata, and in a command's warnings when it is killed), and
commands keep only the per-process limits. Nothing here ever fails a command:
a step that fails is logged and the command runs without its cgroup.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")


def own_cgroup(proc: Path = Path("/proc/self/cgroup")) -> str | None:
    """This process's cgroup v2 path (the `0::` line), or None on a v1-only host."""
    try:
        for line in proc.read_text(encoding="ascii").splitlines():
            if line.startswith("0::"):
                return line[3:] or "/"
    except OSError:
        return None
    return None


class Cgroups:
    """The broker's cgroup (when it can have children with controllers) and its commands' groups."""

    def __init__(self, memory_mb: int, max_processes: int, cpu_cores: float, root: Path = ROOT) -> None:
        self.memory = memory_mb * 1024 * 1024
        self.pids = max_processes
        self.cpu_cores = cpu_cores
        self.root = root
        self.base: Path | None = None
        self.unavailable: str | None = "not started"

    def start(self) -> str | None:
        """Set up delegation; None when commands get cgroups, else the reason they do not."""
        self.unavailable = self._start()
        if self.unavailable is None:
            log.info("sandbox: each command runs in a cgroup of its own under %s", self.base)
        else:
            log.warning(
                "sandbox: commands' memory, process and CPU limits hold per process only (prlimit), not "
                "for a command's processes together: %s",
                self.unavailable,
            )
        return self.unavailable

    def _start(self) -> str | None:
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

    def create(self) -> Path | None:
        """A new group for one command with its limits, or None (no cgroups, or making it failed)."""
        if self.base is None:
            return None
        group = self.base / f"cmd-{secrets.token_hex(6)}"
        try:
            group.mkdir()
            (group / "memory.max").write_text(str(self.memory), encoding="ascii")
            with contextlib.suppress(FileNotFoundError):
                (group / "memory.swap.max").write_text("0", encoding="ascii")
            (group / "pids.max").write_text(str(self.pids), encoding="ascii")
            period = 100_000
            (group / "cpu.max").write_text(f"{int(self.cpu_cores * period)} {period}", encoding="ascii")
        except OSError as exc:
            log.warning("sandbox: a command's cgroup could not be made (%s); it runs without one", exc)
            self.remove(group)
            return None
        return group

    @staticmethod
    def wrap(group: Path | None, argv: list[str]) -> list[str]:
        """`argv`, joining `group` first (a shell writes its pid to cgroup.procs, then execs it)."""
        if group is None:
            return argv
        # A failed join leaves the command with its per-process limits only, as on a host without cgroups.
        join = '{ echo $$ > "$0/cgroup.procs"; } 2>/dev/null; exec "$@"'
        return ["/bin/sh", "-c", join, str(group), *argv]

    @staticmethod
    def out_of_memory(group: Path | None) -> bool:
        """Whether the kernel killed a process of the group for passing `memory.max`."""
        if group is None:
            return False
        try:
            for line in (group / "memory.events").read_text(encoding="ascii").splitlines():
                name, _, count = line.partition(" ")
                if name == "oom_kill" and int(count) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    @staticmethod
    def remove(group: Path | None) -> None:
        """Kill what is left of the command's processes and remove its group."""
        if group is None:
            return
        with contextlib.suppress(OSError):
            (group / "cgroup.kill").write_text("1", encoding="ascii")
        for _ in range(50):  # processes take a moment to leave after cgroup.kill
            try:
                group.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
        log.warning("sandbox: the cgroup %s could not be removed", group)
