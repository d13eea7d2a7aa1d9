"""`antler sandbox install|doctor|check`: the sandbox's toolbox, and what a sandboxed command really gets.

`install` builds the toolbox (`sandbox.toolbox`) unless it is current; `antler up` runs it in the
background when it finds none current (`antler.up_toolbox`). `doctor` runs one probe command
through the configured provider, exactly as the broker would run an agent's command, and reports
what it found: the isolation, the Python with each toolbox package's version, and Node.js. `check`
tries what the sandbox holds on this host (`sandbox.check`): namespaces, seccomp, descriptors,
memory, processes, CPU, disk, network, as a table; it exits 1 when something fails to hold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from antler._common import CliError, load, setup_logging, status
from config import AppConfig
from sandbox.check import check, table
from sandbox.limits import make_limits
from sandbox.paths import ThreadFS
from sandbox.providers import make_provider
from sandbox.toolbox import Toolbox, ToolboxError

log = logging.getLogger("antler.sandbox")

# Runs inside the sandbox: which python3 it finds, and each package's installed version.
_PROBE = r"""
import importlib.metadata as md, json, re, shutil, subprocess, sys
packages = {}
for name in sys.argv[1:]:
    try:  # the distribution's name out of a requirement such as "reportlab>=4" or "pkg[extra]"
        packages[name] = md.version(re.split(r"[\[<>=!~;@ ]", name.strip())[0])
    except md.PackageNotFoundError:
        packages[name] = None
node = shutil.which("node")
node_version = None
if node:
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
print(json.dumps({"python": sys.executable, "version": sys.version.split()[0], "packages": packages,
                  "node": node, "node_version": node_version}))
"""


def announce_limits(config: AppConfig) -> None:
    """Say, in one line, what will hold each command's memory in the broker `antler up` starts."""
    c = config.sandbox
    # The broker runs beside antler up in its cgroup, and cgroup v2 lets a group with processes have
    # no controlled children: v2 delegation needs `antler run sandbox` in a cgroup of its own.
    beside = "the broker shares antler up's cgroup (run `antler run sandbox` on its own for v2)"
    limits = make_limits(
        c.command_limits, c.memory_mb, c.max_processes, c.cpu_cores, excluded={"cgroup2": beside}, quiet=True
    )
    limits.stop()
    status(f"sandbox: commands' memory capped per command by {limits.caps['memory']}: {limits.describe()}")


async def sandbox(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    toolbox = Toolbox.from_config(config)
    if args.sandbox_command == "install":
        try:
            built = await asyncio.to_thread(toolbox.ensure, status)
        except ToolboxError as exc:
            raise CliError(f"the toolbox could not be installed: {exc.detail}") from None
        if not built:
            status(f"sandbox toolbox up to date: {toolbox.python_dir}")
        return 0
    if args.sandbox_command == "check":
        rows = await check(config.sandbox)
        print(table(rows))
        return 1 if any(row.holds == "FAIL" for row in rows) else 0
    return await doctor(config, toolbox)


async def doctor(config: AppConfig, toolbox: Toolbox) -> int:
    """Print what a sandboxed command gets; 1 when the toolbox is missing, stale or lacks a package."""
    provider = await asyncio.to_thread(make_provider, config.sandbox, toolbox)
    isolation = (
        f"bwrap (isolated: namespaces of its own, {'with' if config.sandbox.allow_network else 'no'} network)"
        if provider.isolated
        else "local (NOT isolated: commands can read and change this machine; install bubblewrap)"
    )
    print(f"sandbox: {isolation}")
    print(f"limits: {provider.limits.describe()}")
    try:
        found = await _probe(provider, list(toolbox.packages))
    finally:
        provider.limits.stop()
    healthy = True
    if not toolbox.enabled:
        print("toolbox: off (sandbox.toolbox.enabled is false)")
    elif toolbox.current():
        print(f"toolbox: {toolbox.python_dir} (up to date)")
    elif toolbox.ready():
        print(f"toolbox: {toolbox.python_dir} (built for another package list: run `antler sandbox install`)")
        healthy = False
    else:
        print(f"toolbox: not installed at {toolbox.python_dir} (run `antler sandbox install`)")
        healthy = False
    if found is None:
        print("python: none (no python3 the sandbox can run)")
        return 1
    print(f"python: {found['version']} ({found['python']})")
    missing = [name for name, version in found["packages"].items() if version is None]
    for name, version in found["packages"].items():
        print(f"  {name} {version or 'MISSING'}")
    print(f"node: {found['node_version']} ({found['node']})" if found["node"] else "node: none")
    return 0 if healthy and not missing else 1


async def _probe(provider: Any, packages: list[str]) -> dict[str, Any] | None:
    """Run the probe in a throwaway thread directory, as the broker runs an agent's command."""
    root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="antler-doctor-"))
    try:
        fs = ThreadFS(root, "doctor", "doctor")
        await asyncio.to_thread(fs.ensure, provider.owner)
        script = fs.workspace / "probe.py"
        await asyncio.to_thread(script.write_text, _PROBE, encoding="utf-8")
        names = " ".join(f"'{p}'" for p in packages if "'" not in p)
        outcome = await provider.run(fs, f"python3 probe.py {names}", 60)
    finally:
        await asyncio.to_thread(shutil.rmtree, root, ignore_errors=True)
    if outcome.exit_code != 0:
        print(f"probe failed (exit {outcome.exit_code}): {outcome.output.strip()[-500:]}")
        return None
    try:
        found: dict[str, Any] = json.loads(outcome.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CliError(f"the probe printed something unexpected: {outcome.output[-500:]!r}") from None
    return found
