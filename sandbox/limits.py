"""One command's memory, processes and CPU, held for all its processes together, on every host.

`prlimit` limits each process of a command: six processes of 800 MB each
took 4.5 GB (issues #27, #47). So each command also gets a group that holds
its processes together, by the first mechanism the host offers
(`sandbox.command_limits`, default `auto`, tries them in this order):

- `cgroup2`: a cgroup of its own in a delegated v2 hierarchy
  (`sandbox.cgroups`): memory, processes and CPU;
- `cgroup1`: a group of its own in each v1 controller that is mounted and
  writable (`sandbox.cgroups_v1`): memory (required, swap included), and
  processes and CPU where those controllers are there;
- `watch`: nothing of the kernel's; the broker sums the memory of the
  command's process tree every `memwatch.INTERVAL` seconds and kills the tree
  past the limit (`sandbox.memwatch`). Processes and CPU stay per process.

Whatever holds the memory, a command that passes it is stopped whole, all
its processes killed, and the broker tells the model so
(`CommandGroup.over_memory`). A watcher thread (`Watcher`) looks at every
running command's group: with cgroups it only notices the kernel's OOM kill
and stops the rest of the command.
"""

from __future__ import annotations

import logging
from typing import Literal

from sandbox.cgroups import CgroupV2
from sandbox.cgroups_v1 import CgroupV1
from sandbox.mechanism import MECHANISMS, CommandGroup, Limits, Mechanism, Watcher
from sandbox.memwatch import TreeWatch

__all__ = ["MECHANISMS", "CommandGroup", "Limits", "Mechanism", "Watcher", "make_limits"]

log = logging.getLogger(__name__)


def make_limits(
    wanted: Literal["auto", "cgroup2", "cgroup1", "watch"],
    memory_mb: int,
    max_processes: int,
    cpu_cores: float,
    *,
    tmpfs: tuple[str, ...] = (),
    excluded: dict[Mechanism, str] | None = None,
    quiet: bool = False,
) -> Limits:
    """The first mechanism this host offers, from `wanted` on (`auto`: from the strongest); logs which
    one holds and why the ones before it do not (unless `quiet`; `Limits.passed` has them).

    Args:
        tmpfs: paths inside a command whose filesystem is memory (counted by the watcher).
        excluded: mechanisms known not to hold here, with why (not tried).
    """
    order = MECHANISMS if wanted == "auto" else MECHANISMS[MECHANISMS.index(wanted) :]
    passed: list[str] = []
    for name in order:
        limits: Limits
        if name == "cgroup2":
            limits = CgroupV2(memory_mb, max_processes, cpu_cores)
        elif name == "cgroup1":
            limits = CgroupV1(memory_mb, max_processes, cpu_cores)
        else:
            limits = TreeWatch(memory_mb, max_processes, cpu_cores, tmpfs=tmpfs)
        reason = (excluded or {}).get(name) or limits.start()
        if reason is None:
            limits.passed = passed
            if not quiet:
                line = limits.describe() + (f" (not {'; not '.join(passed)})" if passed else "")
                (log.warning if name == "watch" else log.info)("sandbox: %s", line)
            return limits
        passed.append(f"{name}: {reason}")
    raise AssertionError("the watcher is always available")  # pragma: no cover
