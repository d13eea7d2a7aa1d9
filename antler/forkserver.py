"""`antler run <component> --processes N`: N processes of one component forked from one that loaded it.

Each runner process holds about 120 MB, nearly all of it what it imported (LangChain, LangGraph,
the openai SDK and its types, pydantic models) and never changes afterwards. Started one by one
(`python -m antler run runner`), every process builds its own copy. Here one process, the
leader, imports the component and the model providers the config names, freezes what it built
out of the cyclic collector's sight (`gc.freeze`: a collection would write to every object and
unshare its page), and forks the N processes: the pages stay shared between them until written,
so a second process costs what it builds and touches (its connection, its compiled agent, the
objects it works with), not the libraries again. `antler up` starts its runners this way on Linux.

The leader runs no event loop and opens no connection. Once it has forked the N processes it
becomes `antler.fork_supervisor` (exec: a bare interpreter of about 11 MB instead of everything it
loaded, which the N processes go on sharing among themselves), which
- starts a process again when one dies (anew, as `antler run` starts it: the loaded state it was
  forked from is gone); one that keeps dying within seconds of starting makes it exit with an
  error, and `antler up` then tells the user (as it does for a child of its own);
- passes SIGTERM/SIGINT on to every process once, waits for them to drain, and exits.
Each process is the component exactly as `antler run` runs it (its own connection, its own
`ComponentReady` announcement with its own pid); it is SIGTERMed if the leader dies. Should the
exec fail, the leader supervises them itself and forks a dead one again from what it loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from antler import fork_supervisor
from antler.components import resolve_component
from antler.pool import MAX_QUICK_DEATHS, QUICK_DEATH, die_with_parent
from bus.launcher import load, run_component, setup_logging
from bus.runtime import run_main
from config import AppConfig

log = logging.getLogger("antler.up")

# What a component loads once it runs rather than at import (seen in a runner's `sys.modules` after
# start-up): loaded before forking too, so no process builds its own copy. A missing one costs memory,
# never correctness.
PRELOAD_ALL = ("uvloop",)
SIGNALS = (signal.SIGTERM, signal.SIGINT)
PRELOAD: dict[str, tuple[str, ...]] = {
    "runner": (
        "agents.threads",
        "agents.sqlite_saver",
        "langgraph.checkpoint.sqlite",
        "langchain_core.runnables.retry",
        "llm.reasoning",
        "llm.http",
        "llm.streaming",
        "openai.resources.chat",
        "openai.lib.streaming.chat",
        "httpcore2",
        "truststore",
        "jiter",
    )
}


# What a component builds the same way in every process, done once before forking (`module:function`,
# called with the config).
BUILD: dict[str, str] = {"runner": "agents.runner:build_tool_schemas"}


def preload(component: str, config: AppConfig) -> None:
    """Import what the component would load on its first work: its warm-up modules and the
    provider module of every configured model."""
    modules = [*PRELOAD_ALL, *PRELOAD.get(component, ())]
    modules += [model.use.partition(":")[0] for model in config.models if ":" in model.use]
    for name in dict.fromkeys(modules):
        try:
            importlib.import_module(name)
        except ImportError as exc:  # a provider not installed: the component says so when it is used
            log.debug("not preloaded: %s (%s)", name, exc)
    if component in BUILD:
        module, _, function = BUILD[component].partition(":")
        try:
            getattr(importlib.import_module(module), function)(config)
        except Exception as exc:  # each process builds what is missing itself
            log.info("not built before forking: %s (%s: %s)", BUILD[component], type(exc).__name__, exc)


def serve_forked(args: argparse.Namespace) -> int:
    """Run `args.processes` processes of `args.component`; the exit code (in each forked process:
    that process's own, returned up the same stack so it exits as `antler run` would)."""
    config = load(args)
    setup_logging(config, args.verbose, args.log_file)
    name, entry = resolve_component(args.component)
    preload(name, config)
    gc.collect()
    gc.freeze()
    if threading.active_count() > 1:  # a thread would be missing (and its locks held) in every fork
        log.warning("%s: a library started a thread while loading; forking anyway", name)

    children: dict[int, int] = {}  # pid -> slot
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return  # once: a second signal would make a process abort instead of draining
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def start(slot: int) -> int | None:
        """Fork one process; None in the forked process itself (which then runs the component).

        Signals wait meanwhile: one reaching the new process before it has its own handlers would
        run `forward` there, on its copy of the siblings' pids."""
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        pid = os.fork()
        if pid == 0:
            return None
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        children[pid] = slot
        log.info("%s process %d forked (pid %d)", name, slot + 1, pid)
        return pid

    leader = os.getpid()
    previous = {sig: signal.signal(sig, forward) for sig in SIGNALS}
    started: dict[int, float] = {}
    quick_deaths: dict[int, int] = {}
    for first in range(args.processes):
        started[first] = time.monotonic()
        if start(first) is None:
            return _child(name, entry, args, previous, leader)
    # Blocked across exec: a signal meanwhile waits for the supervisor's handlers instead of killing it
    # (its processes would then drain with no one to say they are gone), and `stopping` holds still.
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    hand_over(name, children, started, stopping)  # returns only if this process could not exec
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    failed = False
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        slot = children.pop(pid, -1)
        if slot < 0 or stopping:
            continue
        code = os.waitstatus_to_exitcode(status)
        quick = time.monotonic() - started[slot] < QUICK_DEATH
        quick_deaths[slot] = quick_deaths.get(slot, 0) + 1 if quick else 0
        if quick_deaths[slot] >= MAX_QUICK_DEATHS:
            log.error("%s process %d keeps exiting (code %s); stopping the others", name, slot + 1, code)
            failed = True
            forward(signal.SIGTERM, None)
            continue
        log.warning("%s process %d exited with code %s; forking it again", name, slot + 1, code)
        time.sleep(min(quick_deaths[slot], 3))
        if stopping:  # a signal while it slept
            continue  # type: ignore[unreachable]  # forward() sets it, which mypy cannot see
        started[slot] = time.monotonic()
        if start(slot) is None:
            return _child(name, entry, args, previous, leader)
    return 1 if failed else 0


def hand_over(name: str, children: dict[int, int], started: dict[int, float], stopping: bool) -> None:
    """Become `antler.fork_supervisor` (exec), which keeps the processes just forked alive: this
    process would otherwise go on mapping every library it loaded, next to the processes that use
    them. Returns only if the exec failed; this process then supervises them itself."""
    state = {
        "name": name,
        "command": [sys.executable, *sys.orig_argv[1:], "--processes", "1"],  # the last one counts
        "children": {str(pid): slot for pid, slot in children.items()},
        "started": {str(slot): at for slot, at in started.items()},
        "quick_death": QUICK_DEATH,
        "max_quick_deaths": MAX_QUICK_DEATHS,
        "stopping": stopping,
        "log": _log_handlers(),
    }
    script = str(Path(fork_supervisor.__file__).resolve())
    for handler in logging.getLogger().handlers:
        handler.flush()
    try:
        os.execve(
            sys.executable,
            [sys.executable, "-I", "-S", script],
            {**os.environ, fork_supervisor.STATE_VARIABLE: json.dumps(state)},
        )
    except OSError as exc:
        log.warning("%s: could not hand its processes to %s (%s); supervising them here", name, script, exc)


def _log_handlers() -> list[dict[str, Any]]:
    """This process's log handlers (stderr, the log file), for the supervisor to set up again."""
    found: list[dict[str, Any]] = []
    for handler in logging.getLogger().handlers:
        formatter = handler.formatter
        spec: dict[str, Any] = {
            "level": handler.level,
            "format": formatter._fmt if formatter is not None else "%(message)s",
            "datefmt": formatter.datefmt if formatter is not None else None,
        }
        if isinstance(handler, logging.FileHandler):
            spec["file"] = handler.baseFilename
        elif not (isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr):
            continue
        found.append(spec)
    return found


def _child(
    name: str, entry: Any, args: argparse.Namespace, handlers: dict[signal.Signals, Any], leader: int
) -> int:
    """In a forked process: the component, as `antler run` runs it (errors go up to `antler.cli`)."""
    for sig, handler in handlers.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    die_with_parent()
    if os.getppid() != leader:  # the leader is gone already: nobody would stop this process
        return 1
    return run_main(run_component(name, entry, args))
