"""Issue #47's attacks, as a hostile prompt makes the agent try them on `antler up` defaults.

One `antler up` for the module, on its defaults on this host (bwrap, commands as uid 65534, the
memory mechanism it picks: cgroup v1 here) with a 256 MB memory limit per command, started holding
descriptors it inherited (a log file with other users' ids, a pipe, a socket), as it holds its own
log. The agent, scripted, runs commands through every path that starts one: the bash tool, a
skill's script, the toolbox's Python, and the grep tool's child (watched from outside while it
matches). Then a command forks six processes of 200 MB each while another user's command runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
import yaml

from bus import Bus
from bus.launcher import login
from config import AppConfig, BusConfig
from sandbox import SandboxClient, bwrap_works
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.antler_up import AntlerUp
from tests.support.tree_memory import TreeMemory, descendants, hogs

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("bwrap"),  # beside the other bwrap tests, never with a fork bomb
    pytest.mark.timeout(300),
    pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here"),
]
CAP_MB = 256
# The processes' shared pages, counted once per process; a watcher's look later: tests/sandbox/test_limits.py.
MARGIN_MB = {"cgroup": 128, "watcher": 256}
SECRET = "thread-of-another-user-0042"
WS = "/mnt/user-data/workspace"
LIST_FDS = "find /proc/$$/fd -mindepth 1 -printf '%f %l\\n'"


@dataclass
class Stack:
    up: AntlerUp
    model: FakeOpenAI
    gateway: str
    bus: Bus
    held: dict[int, str]  # descriptor -> what it is, held by antler up (and so by its broker)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    workdir = tmp_path_factory.mktemp("attacks")
    log = workdir / "other-users.log"
    log.write_text(f"run of {SECRET}: tool bash failed\n", encoding="utf-8")
    log_fd = os.open(log, os.O_RDWR | os.O_APPEND)
    read_end, write_end = os.pipe()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held = {log_fd: str(log), read_end: "pipe", write_end: "pipe", listener.fileno(): "socket"}
    skill = workdir / "skills" / "public" / "fd-probe"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: fd-probe\ndescription: Lists what a script holds open\n---\nRun list-fds.sh.\n",
        encoding="utf-8",
    )
    (skill / "list-fds.sh").write_text(f"#!/bin/sh\necho SKILL-FDS\n{LIST_FDS}\n", encoding="utf-8")
    (skill / "list-fds.sh").chmod(0o755)
    async with FakeOpenAI(api_key="sk-test") as model:
        config = {
            "models": [{"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}],
            "gateway": {"port": 0},
            "runner": {"processes": 2},  # the default on two cores
            "skills": {"path": "./skills"},
            "sandbox": {"memory_mb": CAP_MB, "grep_timeout_seconds": 8},
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        up = AntlerUp(workdir)
        bus: Bus | None = None
        try:
            await up.start(runners=2, pass_fds=tuple(held))
            as_admin = login(AppConfig(bus=BusConfig(data_dir=str(up.data_dir))))
            bus = await as_admin.connect(await up.nats_url(), "test-attacks", provision=False)
            yield Stack(up, model, await up.gateway_url(), bus, held)
            await bus.close()
            bus = None
            code = await up.stop(60)
            assert code == 0, f"antler up did not stop cleanly ({code}):\n{up.tail()}"
        finally:
            if bus is not None:
                await bus.close()
            await up.kill_all()
            for fd in held:
                if fd != listener.fileno():
                    os.close(fd)
            listener.close()
        assert up.violations() == []


@pytest.fixture(autouse=True)
def clean_script(stack: Stack) -> Iterator[None]:
    yield
    stack.model._script.clear()


async def run_agent(stack: Stack, text: str, timeout: float = 120) -> list[str]:
    """One run through the HTTP API; the tool results the model was given during it."""
    asked_before = len(stack.model.agent_requests)
    async with httpx.AsyncClient(base_url=stack.gateway, timeout=timeout) as http:
        reply = await http.post(
            "/api/runs/wait",
            json={"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}},
        )
    assert reply.status_code == 200, reply.text
    return [
        str(r["messages"][-1]["content"])
        for r in stack.model.agent_requests[asked_before:]
        if r["messages"][-1]["role"] == "tool"
    ]


def descriptors(listing: str, after: str) -> dict[int, str]:
    """`fd -> target` from the lines after the `after` marker line."""
    lines = listing.split(after, 1)[1].strip().splitlines()
    found = {}
    for line in lines:
        fd, _, target = line.partition(" ")
        if fd.isdigit():
            found[int(fd)] = target
    return found


def _nothing_of_the_host(found: dict[int, str], own: str | None = None) -> None:
    """Only the command's pipes (and `own`, a file the command itself opened)."""
    found = {fd: target for fd, target in found.items() if target != own}
    assert sorted(found) == [0, 1, 2], found
    assert found[0] == "/dev/null"
    assert not any(SECRET in t or "other-users.log" in t or "socket" in t for t in found.values())


async def test_the_antler_up_log_says_what_caps_a_commands_memory(stack: Stack) -> None:
    line = await stack.up.wait_for_line("sandbox: commands' memory capped per command by", stream="err")
    assert f"{CAP_MB} MB" in line


async def test_commands_on_every_path_find_only_their_own_pipes(stack: Stack) -> None:
    _broker(stack)
    py = (
        "import os, sys; print('PY-FDS', sys.executable)\n"
        "for fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
        "    try: print(fd, os.readlink(f'/proc/self/fd/{fd}'))\n"
        "    except OSError: pass  # the listing's own, closed by now"
    )
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo BASH-FDS; {LIST_FDS}; true"})], when="FDS-GO"),
        Reply(
            tool_calls=[ToolCall("bash", {"command": "sh /mnt/skills/public/fd-probe/list-fds.sh"})],
            when="BASH-FDS",
        ),
        Reply(tool_calls=[ToolCall("write_file", {"path": f"{WS}/p.py", "content": py})], when="SKILL-FDS"),
        Reply(tool_calls=[ToolCall("bash", {"command": "python3 p.py"})], when="p.py"),
        Reply(text="Listed.", when="PY-FDS"),
    )
    bash, skill, _, toolbox_python = await run_agent(stack, "FDS-GO")
    _nothing_of_the_host(descriptors(bash, "BASH-FDS"))
    # sh reads the script it runs through a descriptor of its own.
    _nothing_of_the_host(descriptors(skill, "SKILL-FDS"), own="/mnt/skills/public/fd-probe/list-fds.sh")
    executable = toolbox_python.split("PY-FDS ", 1)[1].split()[0]
    assert executable.startswith("/opt/toolbox/python/"), "the toolbox's Python ran"
    _nothing_of_the_host(descriptors(toolbox_python, executable))


async def test_the_grep_tools_child_and_everything_between_it_and_the_broker_hold_nothing_of_the_host(
    stack: Stack,
) -> None:
    slow = {"path": f"{WS}/slow.txt", "content": "a" * 34 + "!\n"}
    stack.model.script(
        Reply(tool_calls=[ToolCall("write_file", slow)], when="GREP-FDS"),
        # (a+)+$ backtracks for seconds on "aaa…a!": the child is there to be looked at.
        Reply(tool_calls=[ToolCall("grep", {"pattern": "(a+)+$", "path": WS})], when="slow.txt"),
        Reply(text="Too slow.", when="grep stopped"),
    )
    broker = _broker(stack)
    run = asyncio.create_task(run_agent(stack, "GREP-FDS"))
    chain: dict[int, dict[int, str]] = {}
    while not run.done() and not chain:
        child = next((pid for pid in descendants(broker) if b"-I\0-S\0-c\0" in _cmdline(pid)), None)
        if child is not None:
            chain = _chain_descriptors(child, broker)
        else:  # a process that comes and goes: nothing to wait on but looking again
            await asyncio.sleep(0.05)
    results = await run
    assert "grep stopped" in results[-1]
    assert chain, "the grep child was seen while it matched"
    assert len(chain) >= 3, "the child, bwrap's process in the sandbox and bwrap's outside it"
    for pid, found in chain.items():
        assert sorted(fd for fd in found if fd <= 2) == [0, 1, 2]
        for fd, target in found.items():
            # bwrap's own (its --args and --file pipes are read and closed before the command starts)
            # and the child's files under the thread: never the broker's log, sockets or pipes.
            if fd > 2:
                assert "other-users.log" not in target, (pid, fd, target)
                assert not target.startswith(("socket:", "pipe:")), (pid, fd, target)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _broker(stack: Stack) -> int:
    """The sandbox broker, `antler up`'s child; it holds the descriptors antler up was given."""
    broker = next(p for p in descendants(stack.up.pid) if b"antler\0run\0sandbox" in _cmdline(p))
    for fd, what in stack.held.items():
        target = os.readlink(f"/proc/{broker}/fd/{fd}")
        assert what in target or target.startswith(f"{what}:"), (
            f"the broker no longer holds descriptor {fd} ({what}) antler up was given: hold one in it "
            "another way, or this test proves nothing"
        )
    return broker


def _chain_descriptors(pid: int, broker: int) -> dict[int, dict[int, str]]:
    """The descriptors of `pid` and of each process between it and the broker, the child's first."""
    chain: dict[int, dict[int, str]] = {}
    while pid != broker:
        found = {}
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
            status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
        except OSError:
            return {}  # it ended meanwhile: look again
        chain[pid] = found
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return chain


async def test_a_command_forking_six_memory_hogs_is_stopped_at_the_cap_while_another_user_works(
    stack: Stack,
) -> None:
    marker = "HOG-UP-47"
    other = SandboxClient(stack.bus, "bob-47", "t-47")
    waiting = asyncio.create_task(
        other.exec(
            "while [ ! -e release ]; do sleep 0.05; done; python3 -c 'print(sum(range(10 ** 6)))'",
            timeout=120,
        )
    )
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": hogs(6, 200, marker)})], when="HOG-GO"),
        Reply(text="It was stopped.", when="memory limit"),
    )
    with TreeMemory(stack.up.pid, marker).sampling() as sampler:
        (result,) = await run_agent(stack, "HOG-GO")
    assert sampler.seen > 0, "the hog's processes were sampled"
    said = await stack.up.wait_for_line("sandbox: commands' memory capped per command by", stream="err")
    margin = MARGIN_MB["watcher" if "by watcher" in said else "cgroup"]
    assert sampler.peak <= (CAP_MB + margin) * 2**20, f"{sampler.peak / 2**20:.0f} MB ({said})"
    assert "[exit code 137]" in result, result
    assert (
        f"[killed: the command's processes together passed its memory limit ({CAP_MB} MB), so all of them "
        "were stopped" in result
    )
    assert "all-done" not in result
    assert not waiting.done(), "the other user's command ran all the while"
    await other.write_file(f"{WS}/release", "")
    meanwhile = await waiting
    assert (meanwhile.exit_code, meanwhile.output, meanwhile.warnings) == (0, "499999500000\n", [])
