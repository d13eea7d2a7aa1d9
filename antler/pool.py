"""Component processes for `antler up`: Python runs one core per process, and one stalled
process must not stall the others.

With `runner.processes` above 1 (or 0: one per core), `antler up` starts that many
`antler run runner` children instead of running the runner in its own process. They
share the runner's durable consumer, so JetStream spreads RunRequests over them, and
one run per thread holds across processes through the thread records. The sandbox
broker always runs as a child of its own: it handles what users send (commands, file
operations, patterns), and nothing it does may hold up the gateway or the router.
A child that dies is started again; one that keeps dying within seconds of starting
fails `antler up`.

Children run `python -P -m antler run <name>`: `-P` keeps the working directory off
`sys.path`, so a folder named `skills` or `bus` where `antler up` runs cannot shadow
Antler's packages; Antler's own location is put on `PYTHONPATH` instead when it is not
installed in site-packages (a source checkout), so the child imports the parent's code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import site
import sys
import time
from pathlib import Path
from typing import Any

import antler
from bus import (
    Bus,
    ComponentEntry,
    EnvelopeError,
    component_degraded,
    component_healthy,
    component_ready,
    component_unhealthy,
    decode,
)
from bus.messages import ComponentReady
from bus.tasks import wait_for

log = logging.getLogger("antler.up")

STOP_GRACE = 20.0  # seconds a runner child gets to drain after SIGTERM before it is killed
QUICK_DEATH = 10.0  # a child that dies sooner than this after starting counts toward giving up
MAX_QUICK_DEATHS = 3


_children: set[asyncio.subprocess.Process] = set()


def process_count(configured: int) -> int:
    return configured if configured > 0 else max(1, min(4, os.cpu_count() or 1))


def child_environment() -> dict[str, str]:
    """The environment of a component child: ours, with Antler's own location first on PYTHONPATH
    when site-packages does not hold it (run from a source checkout)."""
    env = dict(os.environ)
    root = str(Path(antler.__file__).resolve().parent.parent)
    installed = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if root not in installed:
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in paths if p != root)])
    return env


def runner_pool(args: argparse.Namespace, url: str, count: int, fork: bool = True) -> ComponentEntry:
    """A component entry that keeps `count` runner processes alive until cancelled: with `fork`, on
    Linux, one child that forks them all from what it loaded, so they share those pages
    (`antler.forkserver`; `runner.fork_processes`)."""
    return process_pool("runner", args, url, count, forked=fork and forking_supported())


def forking_supported() -> bool:
    """Forking a loaded process (`antler.forkserver`) is safe where `fork` is the platform's way
    (Linux); not on macOS, whose system libraries do not survive it."""
    return hasattr(os, "fork") and os.uname().sysname == "Linux"


def process_pool(
    name: str, args: argparse.Namespace, url: str, count: int = 1, *, forked: bool = False
) -> ComponentEntry:
    """A component entry that keeps `count` `antler run <name>` processes alive until cancelled;
    ready once each has announced itself (`ComponentReady` on `<p>.ready.<name>`). `forked`: one
    child, `antler run <name> --processes <count>`, forks them (and starts again one that dies)."""
    command = [sys.executable, "-P", "-m", "antler", "run", name, "--nats-url", url]
    if forked and count > 1:
        command += ["--processes", str(count)]
    for flag, value in (("--config", args.config), ("--data-dir", args.data_dir), ("--prefix", args.prefix)):
        if value:
            command += [flag, str(value)]
    if getattr(args, "log_file", None):
        command += ["--log-file", str(args.log_file)]
    if args.verbose:
        command.append("--verbose")

    async def run(bus: Bus, _config: Any) -> None:
        # Listening before any child starts: a child announces once, when its consumer takes work.
        ready_pids: set[int] = set()
        all_ready = asyncio.Event()
        problems: dict[int, str] = {}  # pid -> why that process cannot serve yet

        async def on_ready(msg: Any) -> None:
            try:
                announcement = decode(ComponentReady, msg.data)
            except EnvelopeError:
                return
            if not _ours(announcement.pid):
                return
            if announcement.problem is not None:
                # A child failing at start retries by itself; `antler up` must not wait on it meanwhile.
                problems[announcement.pid] = announcement.problem
                component_unhealthy(
                    f"process {announcement.pid}: {announcement.problem}; it retries by itself"
                )
                return
            if announcement.degraded is not None:  # `antler up` says so (a runner with no usable model)
                component_degraded(announcement.degraded)
            ready_pids.add(announcement.pid)
            problems.pop(announcement.pid, None)
            if len(ready_pids) >= count:
                problems.clear()  # those of processes that died since, if any
                all_ready.set()
            if not problems:
                component_healthy()

        sub = await bus.nc.subscribe(bus.subjects.component_ready(name), cb=on_ready)
        announcer = asyncio.create_task(_ready_when(all_ready, sub))
        env = child_environment()
        children = [
            asyncio.create_task(_keep_alive(name, command, env, n), name=f"{name}-{n}")
            for n in range(1 if forked and count > 1 else count)
        ]
        try:
            done, _ = await asyncio.wait(children, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a child that could not be kept alive
        finally:
            announcer.cancel()
            for task in children:
                task.cancel()
            await asyncio.gather(announcer, *children, return_exceptions=True)

    return run


def _ours(pid: int) -> bool:
    """A process we started, or one forked by it (`antler.forkserver`)."""
    mine = {child.pid for child in _children}
    if pid in mine:
        return True
    import psutil  # only here: forked runners announce themselves once each

    try:
        return psutil.Process(pid).ppid() in mine
    except psutil.Error:
        return False


async def _ready_when(all_ready: asyncio.Event, sub: Any) -> None:
    """The pool is ready once every process is (the first time; a restarted one catches up)."""
    try:
        await all_ready.wait()
        component_ready()
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _keep_alive(name: str, command: list[str], env: dict[str, str], number: int) -> None:
    quick_deaths = 0
    while True:
        started = time.monotonic()
        # Its own session: a Ctrl-C reaches only `antler up`, which then stops each child exactly once
        # (a second signal would make a runner abort instead of draining).
        child = await asyncio.create_subprocess_exec(
            *command, env=env, start_new_session=True, preexec_fn=die_with_parent
        )
        _children.add(child)
        log.info("%s process %d started (pid %d)", name, number + 1, child.pid)
        try:
            code = await child.wait()
        except asyncio.CancelledError:
            await asyncio.shield(_stop(child))
            raise
        finally:
            if child.returncode is not None:
                _children.discard(child)
        quick_deaths = quick_deaths + 1 if time.monotonic() - started < QUICK_DEATH else 0
        if quick_deaths >= MAX_QUICK_DEATHS:
            raise RuntimeError(f"{name} process {number + 1} keeps exiting (code {code}); see its log above")
        log.warning("%s process %d exited with code %s; starting it again", name, number + 1, code)
        await asyncio.sleep(min(quick_deaths, 3))


def die_with_parent() -> None:
    """In the child before exec: SIGTERM it if `antler up` dies without stopping it (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def kill_children() -> None:
    """Last resort when `antler up` exits: SIGKILL any component child still alive (none, normally)."""
    for child in list(_children):
        if child.returncode is None:
            log.warning("component process %d is still running; killing it", child.pid)
            with contextlib.suppress(ProcessLookupError):
                child.kill()
    _children.clear()


async def _stop(child: asyncio.subprocess.Process, grace: float = STOP_GRACE) -> None:
    """SIGTERM (the component drains its work), then SIGKILL if it does not end within `grace`.

    A killed runner loses nothing: its un-acked runs are delivered again and resume from
    their checkpoints. `grace` stays below `antler up`'s own drain timeout, so a child is
    always stopped before `antler up` exits."""
    if child.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        await wait_for(child.wait(), grace)
    except TimeoutError:
        log.warning("component process %d did not stop within %.0fs; killing it", child.pid, grace)
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
