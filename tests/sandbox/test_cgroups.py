"""Per-command cgroups: what the broker writes into a delegated cgroup v2 hierarchy.

The kernel's side cannot be exercised on a host without cgroup v2 delegation (this
one's CI has cgroup v1), so this checks the broker's side against a directory laid
out like a delegated cgroup: the limits each command's group gets, and that the
command joins its group before it runs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox.cgroups import Cgroups, own_cgroup


@pytest.fixture
def delegated(tmp_path: Path) -> Path:
    own = own_cgroup()
    if own is None:
        pytest.skip("this process is in no cgroup v2 group")
    base = tmp_path / own.lstrip("/")
    base.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    return base


def test_each_command_gets_a_group_with_its_limits_and_joins_it_before_it_runs(
    tmp_path: Path, delegated: Path
) -> None:
    cgroups = Cgroups(memory_mb=256, max_processes=32, cpu_cores=0.5, root=tmp_path)
    assert cgroups.start() is None
    assert (delegated / "broker" / "cgroup.procs").read_text() == str(os.getpid())
    assert (delegated / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    group = cgroups.create()
    assert group is not None
    assert group.parent == delegated
    assert (group / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (group / "pids.max").read_text() == "32"
    assert (group / "cpu.max").read_text() == "50000 100000"
    ran = subprocess.run(Cgroups.wrap(group, ["/bin/sh", "-c", "echo $$"]), capture_output=True, text=True)
    assert ran.stdout.strip() == (group / "cgroup.procs").read_text().strip(), "it ran as the joined process"
    assert not Cgroups.out_of_memory(group)
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert Cgroups.out_of_memory(group)


def test_a_host_without_a_unified_hierarchy_is_named_as_the_reason(tmp_path: Path) -> None:
    cgroups = Cgroups(memory_mb=256, max_processes=32, cpu_cores=1, root=tmp_path)
    assert cgroups.start() == f"{tmp_path} is not a cgroup v2 (unified) hierarchy on this host"
    assert cgroups.create() is None
    assert Cgroups.wrap(None, ["true"]) == ["true"]
