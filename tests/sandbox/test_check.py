"""`antler sandbox check`: what this host's sandbox holds, tried by commands run through it.

Run as an operator runs it (a child process, on uvloop as the broker is), so the table is this
host's: with bwrap every row but seccomp must hold here, whichever mechanism holds the memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import finished, run_antler
from tests.support.sandbox import needs_bwrap

pytestmark = pytest.mark.asyncio


async def check(tmp_path: Path, **sandbox: object) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Exit code, `what -> (holds, detail)` and stderr of `antler sandbox check` with `sandbox` set."""
    config = tmp_path / "config.yaml"
    data = {"bus": {"data_dir": str(tmp_path / "data")}, "sandbox": sandbox}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = await finished(await run_antler("sandbox", "check", "-c", str(config)), 120)
    lines = out.splitlines()
    assert lines[:1] == ["WHAT         HOLDS  DETAIL"], out + err
    rows = {}
    for line in lines[1:]:
        what, holds, detail = line.split(None, 2)
        rows[what] = (holds, detail)
    return code, rows, err


@needs_bwrap
@pytest.mark.parametrize("mechanism", ["auto", "watch"])
async def test_on_this_host_the_sandbox_holds_every_row_it_checks(tmp_path: Path, mechanism: str) -> None:
    code, rows, err = await check(tmp_path, provider="bwrap", command_limits=mechanism)
    assert code == 0, (rows, err)
    assert list(rows) == [
        "isolation", "user", "seccomp", "descriptors", "memory", "processes", "cpu", "disk", "network",
    ]  # fmt: skip
    for what in ("isolation", "user", "descriptors", "processes", "disk", "network"):
        assert rows[what][0] == "ok", (what, rows[what])
    assert "namespaces of its own: mnt, pid, net, ipc, uts" in rows["isolation"][1]
    assert rows["user"][1] == "uid 65534, capabilities none, no_new_privs 1"
    memory = rows["memory"]
    assert "4 processes allocating together were stopped at the 64 MB trial limit" in memory[1]
    if mechanism == "watch":
        assert memory[0] == "WEAK", "a watcher looks now and then: the kernel's limit is stronger"
        assert "by watcher" in memory[1]
        assert rows["cpu"][0] == "WEAK"
    else:
        assert memory[0] == "ok"
        assert "by cgroup" in memory[1]
    assert rows["seccomp"][0] in ("ok", "WEAK")


async def test_the_local_provider_is_reported_as_not_isolated_and_the_check_fails(tmp_path: Path) -> None:
    code, rows, _ = await check(tmp_path, provider="local")
    assert code == 1
    assert rows["isolation"] == ("FAIL", "local provider: commands run on this machine as this user")
    assert rows["descriptors"][0] == "ok", "not isolated, but still nothing of ours crosses"
