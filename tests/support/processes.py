"""Processes as the operating system sees them (/proc): alive or not, a tree below a pid, CPU used."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass(frozen=True)
class Proc:
    """A process as /proc showed it: the command line tells a reused pid apart."""

    pid: int
    cmdline: str

    @property
    def alive(self) -> bool:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[1].split()[0]
        return state != "Z" and cmdline.replace(b"\0", b" ").decode(errors="replace").strip() == self.cmdline


def descendants(root: int) -> list[Proc]:
    """Every live process below `root`, found by parent pid (the kernel here lacks /proc/*/children)."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        parents[int(entry.name)] = int(fields[1])
        cmdlines[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    found: list[Proc] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                found.append(Proc(pid, cmdlines[pid]))
                frontier.append(pid)
    return found


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time a process has used so far (clock ticks; 0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


async def busiest(processes: list[Proc], window: float = 1.0) -> Proc:
    """The process that used the most CPU over the next `window` seconds (the one doing the work)."""
    before = {p.pid: cpu_ticks(p.pid) for p in processes}
    await asyncio.sleep(window)
    return max(processes, key=lambda p: cpu_ticks(p.pid) - before[p.pid])
