"""Per-command cgroups: what the broker writes into a delegated cgroup v2 hierarchy, and into the
cgroup v1 controllers.

The v2 kernel side cannot be exercised on a host without cgroup v2 delegation (this one's CI has
cgroup v1), so v2 is checked against a directory laid out like a delegated cgroup: the limits each
command's group gets, and that the command joins its group before it runs. v1 is checked against
the kernel's own controllers where this host mounts them (tests/sandbox/test_limits.py runs
commands under them).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.cgroups import CgroupV2, joining, own_cgroup
from sandbox.cgroups_v1 import CgroupV1, v1_hierarchies
from tests.conftest import REPO


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
    cgroups = CgroupV2(memory_mb=256, max_processes=32, cpu_cores=0.5, root=tmp_path)
    assert cgroups.start() is None
    assert (delegated / "broker" / "cgroup.procs").read_text() == str(os.getpid())
    assert (delegated / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    group = cgroups.create()
    assert group.path.parent == delegated
    assert (group.path / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (group.path / "memory.oom.group").read_text() == "1", "the kernel kills the whole command"
    assert (group.path / "pids.max").read_text() == "32"
    assert (group.path / "cpu.max").read_text() == "50000 100000"
    ran = subprocess.run(group.wrap(["/bin/sh", "-c", "echo $$"]), capture_output=True, text=True)
    joined = (group.path / "cgroup.procs").read_text().strip()
    assert ran.stdout.strip() == joined, "it ran as the joined process"
    assert not group.poll()
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.poll()


def test_a_host_without_a_unified_hierarchy_is_named_as_the_reason(tmp_path: Path) -> None:
    cgroups = CgroupV2(memory_mb=256, max_processes=32, cpu_cores=1, root=tmp_path)
    assert cgroups.start() == f"{tmp_path} is not a cgroup v2 (unified) hierarchy on this host"


def test_a_command_that_cannot_join_its_group_does_not_run(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "cgroup.procs"
    ran = subprocess.run(joining([missing], ["echo", "ran"]), capture_output=True, text=True)
    assert ran.returncode == 125
    assert "ran" not in ran.stdout
    assert "could not join its cgroup" in ran.stderr


def test_v1_controllers_are_found_below_their_mount_roots(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    )
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("4:memory:/process_api/x\n2:cpu,cpuacct:/docker/abc/inner\n0::/\n")
    found = v1_hierarchies(mountinfo, cgroup)
    assert found == {
        "memory": Path("/sys/fs/cgroup/memory/process_api/x"),
        "cpu": Path("/sys/fs/cgroup/cpu,cpuacct/inner"),
        "cpuacct": Path("/sys/fs/cgroup/cpu,cpuacct/inner"),
    }
    assert CgroupV1(256, 32, 1, hierarchies={}).start() == "no cgroup v1 memory controller is mounted here"


# A broker of its own process: the groups are named by pid, and this test process's other brokers
# (the in-process sandboxes of earlier tests) may still have commands in theirs.
BROKER = """
import json, os, sys
from sandbox.cgroups_v1 import CgroupV1
limits = CgroupV1(64, 16, 1)
result = {"pid": os.getpid(), "start": limits.start()}
group = limits.create()
result["limit"] = (group.memory / "memory.limit_in_bytes").read_text().strip()
group.close()
result["group_left"] = group.memory.exists()
limits.stop()
print(json.dumps(result))
"""


def test_v1_groups_of_a_broker_that_died_are_removed_at_the_next_start() -> None:
    hierarchies = v1_hierarchies()
    own = hierarchies.get("memory")
    if own is None or not os.access(own, os.W_OK):
        pytest.skip("no writable cgroup v1 memory controller here")
    stale = own / "antler-sandbox-999999999"  # above pid_max: never a live process
    (stale / "cmd-left").mkdir(parents=True)
    try:
        ran = subprocess.run(
            [sys.executable, "-c", BROKER], capture_output=True, text=True, timeout=60, cwd=REPO, check=False
        )
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)
        assert result["start"] is None
        assert not stale.exists(), "the dead broker's groups were removed at the start"
        assert result["limit"] == str(64 * 2**20)
        assert not result["group_left"], "a command's group goes with it"
        assert not (own / f"antler-sandbox-{result['pid']}").exists(), "the broker's own group at its stop"
    finally:
        for left in (stale / "cmd-left", stale):
            with contextlib.suppress(OSError):
                left.rmdir()
