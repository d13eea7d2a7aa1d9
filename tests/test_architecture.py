"""Components stay apart: they talk over the bus, never through each other's code.

The component packages (agents, sandbox, channels, gateway, memory) may import
the shared libraries (bus, config, skills) and their own modules; the agent
runner may also use the sandbox's client side (`sandbox.client`,
`sandbox.errors`, and `sandbox.hygiene`: the broker's command checks, pure functions, so a
background command the broker would refuse is refused at once by the tool). The shared
libraries import no component. `antler` is the launcher that names every component's
entry, so it is not checked; neither are the tests.

`skills` is a shared library rather than a component: it only reads SKILL.md
folders (the runner puts them in the prompt, the gateway lists and installs
them) and runs nowhere on its own.

And the components that need no model do not load LangChain: `antler run
sandbox` and `antler run router` are started as real processes and asked what
they imported; so is `antler run subagents` while idle (it loads LangChain for
its first task: `antler up` hosts it beside the router and the gateway).
"""

from __future__ import annotations

import ast
import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from nats.js.errors import NotFoundError

from agents.subagents import EXECUTOR_DURABLE
from bus import Bus
from bus.messages import InboundMessage
from tests.conftest import REPO, finished, run_antler
from tests.support.antler_up import AntlerUp
from tests.support.sandbox import exec_once_up

COMPONENTS = ("agents", "sandbox", "channels", "gateway", "memory", "schedules", "agentproto", "browser")
SHARED = ("bus", "config", "llm", "skills", "access")
ALLOWED: dict[str, tuple[str, ...]] = {"agents": ("sandbox.client", "sandbox.errors", "sandbox.hygiene")}

# Known imports across components, each with the issue that removes it. The test fails once one is
# gone, so this list only ever shrinks.
# Crossings allowed for now, each with the issue that removes it (none today).
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository, e.g. "gateway/app.py"
    line: int
    target: str  # the module (or module.name for `from module import name`)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool, path: str = "<source>") -> Iterator[Import]:
    """Every import in the source, at any depth (functions, `if TYPE_CHECKING:`), relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield Import(path, node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def checked_files() -> Iterator[tuple[str, Path]]:
    for package in (*COMPONENTS, *SHARED):
        for path in sorted((REPO / package).rglob("*.py")):
            yield package, path


def crossings() -> list[Import]:
    """Imports from one component (or shared library) into a component it may not use."""
    found = []
    for package, path in checked_files():
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(REPO).as_posix()
        for imp in imports_of(source, module_name(path), path.name == "__init__.py", rel):
            into = next((c for c in COMPONENTS if within(imp.target, c)), None)
            if into is None or into == package:
                continue
            # `from sandbox.client import X` is "sandbox.client.X"; `from sandbox import X` is not allowed.
            if any(within(imp.target, allowed) for allowed in ALLOWED.get(package, ())):
                continue
            found.append(imp)
    return found


def test_the_walk_sees_imports_at_any_depth_and_resolves_relative_ones() -> None:
    source = (
        "import bus.subjects\n"
        "from . import sibling\n"
        "from ..x import y\n"
        "def later():\n"
        "    from agents.models import create_chat_model\n"
        "if True:\n"
        "    import gateway\n"
    )
    targets = [i.target for i in imports_of(source, "channels.sub.mod", is_package=False)]
    assert sorted(targets) == sorted(
        ["bus.subjects", "channels.sub.sibling", "channels.x.y", "agents.models.create_chat_model", "gateway"]
    )


def test_every_package_is_walked() -> None:
    walked = {package for package, _ in checked_files()}
    assert walked == {*COMPONENTS, *SHARED}


def is_known(imp: Import, path: str, target: str) -> bool:
    return imp.path == path and within(imp.target, target)


def test_no_component_imports_another() -> None:
    unexpected = [
        f"{i.path}:{i.line} imports {i.target}"
        for i in crossings()
        if not any(is_known(i, path, target) for path, target in KNOWN_EXCEPTIONS)
    ]
    assert unexpected == [], (
        "components talk over the bus, not through each other's code (see docs/architecture.md):\n"
        + "\n".join(unexpected)
    )


def test_no_test_module_imports_another() -> None:
    """What tests share lives in tests/support (or a conftest, a fake, a scenario's harness): a test
    module imported by another runs its module-level setup twice and hides what is shared."""
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        rel = path.relative_to(REPO).as_posix()
        for imp in imports_of(path.read_text(encoding="utf-8"), module_name(path), False, rel):
            if any(part.startswith("test_") for part in imp.target.split(".")[:-1]) or (
                imp.target.split(".")[-1].startswith("test_") and imp.target.startswith("tests.")
            ):
                found.append(f"{imp.path}:{imp.line} imports {imp.target}")
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name.startswith("test_"):
            continue
        rel = path.relative_to(REPO).as_posix()
        for imp in imports_of(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py", rel
        ):
            if any(part.startswith("test_") for part in imp.target.split(".")[:-1]):
                found.append(f"{imp.path}:{imp.line} imports {imp.target}")
    assert found == [], "move what is shared into tests/support:\n" + "\n".join(found)


# What test packages share: helpers (tests/support), fake external services (tests/fakes) and the
# small components tests start as processes (tests/components); and the top-level tests/conftest.py
# and tests/postgres.py. tests/bench is not shared: its modules import each other, and only the
# `antler bench` command (not a test) imports them.
SHARED_TEST_PACKAGES = ("support", "fakes", "components")


def test_no_test_package_imports_another_ones_conftest_or_modules() -> None:
    """A helper two test packages use lives in tests/support: importing another package's conftest
    pulls in its fixtures and its own imports, and hides that the helper is shared."""
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        parts = path.relative_to(REPO / "tests").parts
        own = parts[0] if len(parts) > 1 else None
        rel = path.relative_to(REPO).as_posix()
        source = path.read_text(encoding="utf-8")
        for imp in imports_of(source, module_name(path), path.name == "__init__.py", rel):
            target = imp.target.split(".")
            if target[0] != "tests" or len(target) < 3:  # tests.conftest.X, tests.postgres.X: shared
                continue
            if target[1] in (own, *SHARED_TEST_PACKAGES) or not (REPO / "tests" / target[1]).is_dir():
                continue
            found.append(f"{imp.path}:{imp.line} imports {imp.target}")
    assert found == [], "move what test packages share into tests/support:\n" + "\n".join(found)


def test_every_known_exception_is_still_needed() -> None:
    found = crossings()
    stale = [
        f"{path} -> {target} ({why})"
        for (path, target), why in KNOWN_EXCEPTIONS.items()
        if not any(is_known(i, path, target) for i in found)
    ]
    assert stale == [], "these imports are gone; remove them from KNOWN_EXCEPTIONS:\n" + "\n".join(stale)


# ------------------------------------------------------------------ components as they run

# Put on the child's PYTHONPATH as sitecustomize.py: it writes the names of every module the process
# imported, from start-up to its drained exit, to the file the test names (not bus/_lazy_imports.py's
# stand-ins for modules never used: those are not imported).
_REPORT_MODULES = """
import atexit, os, sys

def _imported(module):
    return type(module).__module__ != "bus._lazy_imports"

def _report():
    with open(os.environ["ANTLER_TEST_MODULES_FILE"], "w", encoding="utf-8") as out:
        out.write("\\n".join(sorted(n for n, m in sys.modules.items() if _imported(m))))

atexit.register(_report)
"""
# The same, each process writing `<pid>.txt` into ANTLER_TEST_MODULES_DIR: for `antler up` and its children.
_REPORT_MODULES_PER_PROCESS = """
import atexit, os, sys

def _imported(module):
    return type(module).__module__ != "bus._lazy_imports"

def _report():
    path = os.path.join(os.environ["ANTLER_TEST_MODULES_DIR"], f"{os.getpid()}.txt")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\\n".join(sorted(n for n, m in sys.modules.items() if _imported(m))))

atexit.register(_report)
"""
HEAVY = ("langchain", "langgraph")
UNUSED = ("aiohttp.",)  # nats-py's websocket transport (ws:// URLs only); see bus/_lazy_imports.py
IDLE_UNUSED = ("rich", "pygments")  # httpx's command line client (bus/_lazy_imports.py)
OIDC = ("authlib", "joserfc")  # single sign-on, loaded on the first sign-in (gateway/sso/oidc.py)


async def run_a_command(bus: Bus) -> None:
    reply = await exec_once_up(bus, "t-light")  # once the broker in the child answers
    assert (reply.error, reply.output.strip()) == (None, "hi")


async def route_a_message(bus: Bus) -> None:
    submitted = await bus.nc.subscribe(bus.subjects.runs_submit)
    message = InboundMessage(channel="cli", chat_id="c1", user_id="u1", text="hello")
    # The chat stream keeps it until the router's durable consumer exists.
    await bus.publish(bus.subjects.chat_in("cli", message.chat_id), message, msg_id=message.dedupe_id())
    await submitted.next_msg(timeout=30)
    await submitted.unsubscribe()


async def wait_for_the_executor(bus: Bus) -> None:
    """Until the subagent executor takes tasks: it loads LangChain only for its first one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        try:
            await bus.js.consumer_info(bus.subjects.subagents_stream, EXECUTOR_DURABLE)
            return
        except NotFoundError:
            assert loop.time() < deadline, "the subagent executor never started"
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("component", "package", "exercise"),
    [
        pytest.param("sandbox", "sandbox", run_a_command, id="sandbox"),
        pytest.param("router", "channels", route_a_message, id="router"),
        pytest.param("subagents", "agents", wait_for_the_executor, id="subagent-executor-idle"),
    ],
)
async def test_components_without_a_model_do_not_load_langchain_or_other_components(
    component: str,
    package: str,
    exercise: Callable[[Bus], Awaitable[None]],
    bus: Bus,
    nats_url: str,
    config_data: dict[str, Any],
    tmp_path: Path,
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_REPORT_MODULES, encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({**config_data, "sandbox": {"provider": "local"}}), encoding="utf-8")
    report = tmp_path / "modules.txt"
    env = {"PYTHONPATH": f"{hook}{os.pathsep}{REPO}", "ANTLER_TEST_MODULES_FILE": str(report)}
    proc = await run_antler("run", component, "-c", str(config), "--nats-url", nats_url, env=env)
    try:
        await exercise(bus)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code, _, err = await finished(proc)
    assert code == 0, err

    imported = report.read_text(encoding="utf-8").split()
    packages = {name.partition(".")[0] for name in imported}
    assert package in packages, "the report comes from the component's own process"
    assert [name for name in imported if name.startswith(HEAVY)] == []
    assert [name for name in imported if name.startswith(UNUSED)] == [], "loaded, never used"
    assert sorted(packages & set(COMPONENTS) - {package}) == []


async def test_antler_up_itself_does_not_load_langchain_when_runners_are_processes(
    tmp_path: Path, config_data: dict[str, Any]
) -> None:
    """`antler up` hosts the router, the gateway, the memory updater, the scheduler and the subagent
    executor (LangChain only for its first task); with runner processes, no agent runs in it."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_REPORT_MODULES_PER_PROCESS, encoding="utf-8")
    reports = tmp_path / "modules"
    reports.mkdir()
    settings = {
        "models": config_data["models"],
        "runner": {**config_data["runner"], "processes": 2},
        "gateway": {"port": 0},
        "sandbox": {"provider": "local", "toolbox": {"enabled": False}},
    }
    workdir = tmp_path / "up"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    up = AntlerUp(workdir)
    try:
        await up.start(runners=2, env={"PYTHONPATH": str(hook), "ANTLER_TEST_MODULES_DIR": str(reports)})
        runners = {p.pid for p in up.runners()}
        assert await up.stop() == 0, up.tail()
    finally:
        await up.kill_all()

    def imported(pid: int) -> list[str]:
        return (reports / f"{pid}.txt").read_text(encoding="utf-8").split()

    assert [m for m in imported(up.pid) if m.startswith(HEAVY)] == []
    # No identity provider configured: the OIDC libraries wait for one; httpx's command line neither.
    assert [m for m in imported(up.pid) if m.partition(".")[0] in (*IDLE_UNUSED, *OIDC)] == []
    for pid in runners:  # the report works in children too: LangChain is where the agents run
        assert "langchain.agents" in imported(pid)
        assert [m for m in imported(pid) if m.partition(".")[0] in IDLE_UNUSED] == []
        assert "langgraph_sdk._async" not in imported(pid), "the LangGraph SDK's client: not used"


def test_every_package_of_ours_is_in_the_installed_distribution() -> None:
    """`pip install .` (the Docker image) installs only the packages pyproject.toml includes: a new
    top-level package left out works in the checkout and fails with ModuleNotFoundError there."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parent.parent
    found = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    ours = sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists() and p.name not in ("tests",))
    missing = [
        name for name in ours if not any(fnmatch.fnmatch(name, pattern) for pattern in found["include"])
    ]
    assert not missing, f"add to [tool.setuptools.packages.find] include: {missing}"
