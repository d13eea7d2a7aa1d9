"""Runner processes for `antler up`: Python runs one core per process, agent runs are CPU-bound.

With `runner.processes` above 1 (or 0: one per core), `antler up` starts that many
`antler run runner` children instead of running the runner in its own process. They
share the runner's durable consumer, so JetStream spreads RunRequests over them, and
one run per thread holds across processes through the thread records. A child that
dies is started again; one that keeps dying within seconds of starting fails `antler up`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from typing import Any

from bus import Bus, ComponentEntry, EnvelopeError, component_ready, decode
from bus.messages import ComponentReady

log = logging.getLogger("antler.up")

STOP_GRACE = 20.0  # seconds a runner child gets to drain after SIGTERM before it is killed
QUICK_DEATH = 10.0  # a child that dies sooner than this after starting counts toward giving up
MAX_QUICK_DEATHS = 3


_children: set[asyncio.subprocess.Process] = set()


def process_count(configured: int) -> int:
    return configured if configured > 0 else max(1, min(4, os.cpu_count() or 1))


def runner_pool(args: argparse.Namespace, url: str, count: int) -> ComponentEntry:
    """A component entry that keeps `count` runner processes alive until cancelled."""
    command = [sys.executable, "-m", "antler", "run", "runner", "--nats-url", url]
    for flag, value in (("--config", args.config), ("--data-dir", args.data_dir), ("--prefix", args.prefix)):
        if value:
            command += [flag, str(value)]
    if args.verbose:
        command.append("--verbose")

    async def run(bus: Bus, _config: Any) -> None:
        # Listening before any child starts: a child announces once, when its consumer takes work.
        ready_pids: set[int] = set()
        all_ready = asyncio.Event()

        async def on_ready(msg: Any) -> None:
            try:
                announcement = decode(ComponentReady, msg.data)
            except EnvelopeError:
                return
            if announcement.pid in {child.pid for child in _children}:
                ready_pids.add(announcement.pid)
                if len(ready_pids) >= count:
                    all_ready.set()

        sub = await bus.nc.subscribe(bus.subjects.component_ready("runner"), cb=on_ready)
        announcer = asyncio.create_task(_ready_when(all_ready, sub))
        children = [asyncio.create_task(_keep_alive(command, n), name=f"runner-{n}") for n in range(count)]
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


async def _ready_when(all_ready: asyncio.Event, sub: Any) -> None:
    """The pool is ready once every runner process is (the first time; a restarted one catches up)."""
    try:
        await all_ready.wait()
        component_ready()
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _keep_alive(command: list[str], number: int) -> None:
    quick_deaths = 0
    while True:
        started = time.monotonic()
        # Its own session: a Ctrl-C reaches only `antler up`, which then stops each child exactly once
        # (a second signal would make a runner abort instead of draining).
        child = await asyncio.create_subprocess_exec(
            *command, start_new_session=True, preexec_fn=_die_with_parent
        )
        _children.add(child)
        log.info("runner process %d started (pid %d)", number + 1, child.pid)
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
            raise RuntimeError(f"runner process {number + 1} keeps exiting (code {code}); see its log above")
        log.warning("runner process %d exited with code %s; starting it again", number + 1, code)
        await asyncio.sleep(min(quick_deaths, 3))


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if `antler up` dies without stopping it (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def kill_children() -> None:
    """Last resort when `antler up` exits: SIGKILL any runner child still alive (none, normally)."""
    for child in list(_children):
        if child.returncode is None:
            log.warning("runner process %d is still running; killing it", child.pid)
            with contextlib.suppress(ProcessLookupError):
                child.kill()
    _children.clear()


async def _stop(child: asyncio.subprocess.Process, grace: float = STOP_GRACE) -> None:
    """SIGTERM (the runner drains its runs), then SIGKILL if it does not end within `grace`.

    A killed runner loses nothing: its un-acked runs are delivered again and resume from
    their checkpoints. `grace` stays below `antler up`'s own drain timeout, so a child is
    always stopped before `antler up` exits."""
    if child.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(child.wait(), grace)
    except TimeoutError:
        log.warning("runner process %d did not stop within %.0fs; killing it", child.pid, grace)
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
