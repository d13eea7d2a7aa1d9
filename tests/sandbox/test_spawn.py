"""Nothing of the broker's process reaches a sandboxed command but its own pipes (issue #47)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import uvloop

from config import SandboxConfig
from sandbox.paths import ThreadFS
from sandbox.providers import make_provider
from tests.support.sandbox import BWRAP

# The shell's own descriptors (not find's: a last command would be exec'd in the shell's place).
LIST_FDS = "find /proc/$$/fd -mindepth 1 -printf '%f %l\\n'; true"


@pytest.mark.parametrize(
    "provider_name",
    [
        pytest.param("local", id="local"),
        pytest.param(
            "bwrap",
            id="bwrap",
            marks=[pytest.mark.skipif(not BWRAP, reason="no bwrap"), pytest.mark.xdist_group("bwrap")],
        ),
    ],
)
def test_a_command_started_on_the_brokers_event_loop_gets_none_of_its_descriptors(
    tmp_path: Path, provider_name: str
) -> None:
    """The broker runs on uvloop, whose subprocesses inherit every descriptor not marked close-on-exec:
    `antler up`'s log among them. Here the process holds such descriptors (a file, a socket, a pipe)."""
    secret = tmp_path / "secret.log"
    secret.write_text("other users' thread ids\n")
    held = [os.open(secret, os.O_RDWR), *os.pipe()]
    for fd in held:
        os.set_inheritable(fd, True)

    async def run() -> list[str]:
        provider = make_provider(SandboxConfig(provider=provider_name))  # type: ignore[arg-type]
        fs = ThreadFS(tmp_path, "ana", "t1")
        fs.ensure(provider.owner)
        try:
            outcome = await provider.run(fs, LIST_FDS, 30)
        finally:
            provider.limits.stop()
        return outcome.output.splitlines()

    try:
        lines = uvloop.run(run())
    finally:
        for fd in held:
            os.close(fd)
    fds = {int(line.split(" ", 1)[0]): line for line in lines}
    assert sorted(fds) == [0, 1, 2], lines
    assert not any("secret.log" in line for line in lines)
