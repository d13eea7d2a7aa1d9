"""What every mechanism of `sandbox.limits` is: a `Limits` making one `CommandGroup` per command, and
the `Watcher` thread looking at the running ones.

The mechanisms (`sandbox.cgroups`, `sandbox.cgroups_v1`, `sandbox.memwatch`) build on these, and
`sandbox.limits` picks one of them for the host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import Literal

log = logging.getLogger(__name__)

Mechanism = Literal["cgroup2", "cgroup1", "watch"]
MECHANISMS: tuple[Mechanism, ...] = ("cgroup2", "cgroup1", "watch")


class CommandGroup(ABC):
    """One command's hold on its limits, from before it starts until its processes are gone."""

    def __init__(self) -> None:
        self.over_memory = False  # its processes together passed the memory limit: it was stopped
        self.peak_bytes: int | None = None  # the most memory it held together, where that is known
        self.near_limit = False  # past half its limit at the last look: look again sooner

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv`, made to join the group before it runs."""
        return argv

    def started(self, pid: int) -> None:  # noqa: B027 - most groups know their processes already
        """The command's first process is running (the root of its process tree)."""

    @abstractmethod
    def poll(self) -> bool:
        """Whether the command's memory passed the limit (it is then stopped). The watcher thread's."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL every process of the command."""

    @abstractmethod
    def close(self) -> None:
        """The command ended: kill what is left of it and let go of the group (blocking)."""


class Limits(ABC):
    """A mechanism holding each command's processes to the limits together."""

    mechanism: Mechanism

    def __init__(self, memory_mb: int, max_processes: int, cpu_cores: float) -> None:
        self.memory = memory_mb * 1024 * 1024
        self.memory_mb = memory_mb
        self.pids = max_processes
        self.cpu_cores = cpu_cores
        self.watcher = Watcher(self.interval)
        self.passed: list[str] = []  # the stronger mechanisms this host does not offer, and why

    interval = 0.1  # seconds between two looks at a running command

    @abstractmethod
    def start(self) -> str | None:
        """Set up on this host; None when the mechanism holds here, else why it does not."""

    @abstractmethod
    def create(self) -> CommandGroup:
        """A group for one command (blocking: it writes to the cgroup filesystem)."""

    @abstractmethod
    def describe(self) -> str:
        """One line: what holds a command's memory, processes and CPU here."""

    def stop(self) -> None:  # noqa: B027 - only cgroup v1 keeps a group of its own
        """Let go of what `start` set up (at exit)."""

    @property
    def caps(self) -> dict[str, str]:
        """What holds each limit for a command as a whole: memory, processes, cpu."""
        return {"memory": self.mechanism, "processes": "per process", "cpu": "per process"}


IDLE_SECONDS = 30.0  # a watcher with no command to watch this long ends its thread


class Watcher:
    """One thread looking at every running command's group every `interval` seconds, stopping the
    ones whose memory passed the limit. A thread, not the event loop: a busy broker must not look
    later, and a command allocates as fast while the loop is busy."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._groups: set[CommandGroup] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def add(self, group: CommandGroup) -> None:
        with self._lock:
            self._groups.add(group)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sandbox-memory-watch", daemon=True)
                self._thread.start()
            self._wake.notify()

    def discard(self, group: CommandGroup) -> None:
        with self._lock:
            self._groups.discard(group)

    def _run(self) -> None:
        # Ahead of the commands it watches when the machine is busy: what a command touches while the
        # watcher waits for a CPU is what passes the limit. Only root may raise a priority.
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -5)
        while True:
            with self._lock:
                while not self._groups:
                    # Nothing to watch for a while: the thread ends (`add` starts another), so a
                    # broker that stopped, or one that runs no command, keeps no thread.
                    if not self._wake.wait(IDLE_SECONDS) and not self._groups:
                        self._thread = None
                        return
                groups = list(self._groups)
            for group in groups:
                try:
                    if not group.over_memory and group.poll():
                        group.over_memory = True
                        group.kill()
                except Exception:  # one command's odd /proc must not stop the others being watched
                    log.exception("sandbox: watching a command's memory failed")
            # What a command touches between two looks passes the limit: near it, look four times as often.
            soon = any(group.near_limit and not group.over_memory for group in groups)
            with self._lock:
                self._wake.wait(self.interval / 4 if soon else self.interval)
