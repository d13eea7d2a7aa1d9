"""What the leader of `antler run <component> --processes N` becomes once it has forked them.

The leader (`antler.forkserver`) loads the component, forks the N processes, then replaces itself
(`exec`) with this script, run by a bare interpreter (`python -I -S`: the standard library only).
The forked processes keep sharing what the leader loaded among themselves, and the leader no
longer maps all of it too: the libraries' 120-odd MB were counted once more in the machine's
resident memory for a process that only waits.

Here, as the leader did before:
- a process that dies is started again, as `antler run <component>` started anew (the leader's
  loaded state is gone, so it is not forked again: it loads in a few seconds and holds its own
  copy of the libraries); one that keeps dying within seconds of starting makes this exit 1;
- SIGTERM/SIGINT is passed on to every process once; it exits when they have drained.

Its state comes from the leader in the environment variable `ANTLER_FORK_SUPERVISOR` (JSON), which
the processes it starts do not inherit. Nothing here imports Antler: `-S` leaves site-packages off
`sys.path`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

STATE_VARIABLE = "ANTLER_FORK_SUPERVISOR"
SIGNALS = (signal.SIGTERM, signal.SIGINT)
PR_SET_PDEATHSIG = 1
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}  # logging's numbers


class Supervisor:
    """The processes of one component (pid -> slot) and how to start one again. (A plain class: the
    `dataclasses` module alone would add a fifth to this process.)"""

    def __init__(
        self,
        name: str,
        command: list[str],
        children: dict[int, int],
        started: dict[int, float],
        quick_death: float,
        max_quick_deaths: int,
        stopping: bool = False,
    ) -> None:
        self.name = name
        self.command = command  # `antler run <component> ...`: one process, started anew
        self.children = children
        self.started = started  # slot -> time.monotonic() it was started (the clock survives exec)
        self.quick_death = quick_death
        self.max_quick_deaths = max_quick_deaths
        self.stopping = stopping
        self.quick_deaths: dict[int, int] = {}

    def forward(self, _signum: int = signal.SIGTERM, _frame: FrameType | None = None) -> None:
        """SIGTERM every process, once: a second signal would make a process abort, not drain."""
        if self.stopping:
            return
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def start(self, slot: int) -> None:
        """Start slot's process anew (fork and exec; signals wait meanwhile, as in the leader)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child execs at once)
            _exec_child(self.command, parent)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        self.children[pid] = slot
        self.started[slot] = time.monotonic()
        log.info("%s process %d started anew (pid %d)", self.name, slot + 1, pid)

    def run(self) -> int:
        """Wait for the processes; start again one that dies; 1 once one keeps dying, else 0."""
        failed = False
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            slot = self.children.pop(pid, -1)
            if slot < 0 or self.stopping:
                continue
            code = os.waitstatus_to_exitcode(status)
            quick = time.monotonic() - self.started.get(slot, 0.0) < self.quick_death
            self.quick_deaths[slot] = self.quick_deaths.get(slot, 0) + 1 if quick else 0
            if self.quick_deaths[slot] >= self.max_quick_deaths:
                log.error(
                    "%s process %d keeps exiting (code %s); stopping the others", self.name, slot + 1, code
                )
                failed = True
                self.forward()
                continue
            log.warning("%s process %d exited with code %s; starting it again", self.name, slot + 1, code)
            time.sleep(min(self.quick_deaths[slot], 3))
            if self.stopping:  # a signal while it slept
                continue  # type: ignore[unreachable]  # forward() sets it, which mypy cannot see
            self.start(slot)
        return 1 if failed else 0


def _exec_child(command: list[str], parent: int) -> None:  # pragma: no cover (runs in the child)
    """In the forked child: SIGTERM it when this supervisor dies, then become `command`."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:
        pass
    try:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        if os.getppid() != parent:  # the supervisor is gone already: nobody would stop this process
            os._exit(1)
        os.execv(command[0], command)
    finally:
        os._exit(127)


class _Log:
    """The leader's log lines, written as its handlers did (stderr and, when it had one, its log
    file, each at its level and in its format). Not the `logging` module: that alone would be a sixth
    of this process, and `logging.handlers` (for a log rotated away) a fifth more."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handlers: list[dict[str, Any]] = []

    def _write(self, level: str, message: str, args: tuple[Any, ...]) -> None:
        now = time.time()
        fields = {
            "name": self.name,
            "levelname": level,
            "process": os.getpid(),
            "message": message % args if args else message,
            "antler_ids": "",  # a run's ids: this process has none
        }
        for spec in self.handlers:
            if LEVELS[level] < spec["level"]:
                continue
            datefmt = spec.get("datefmt")
            stamp = time.strftime(datefmt or "%Y-%m-%d %H:%M:%S", time.localtime(now))
            if not datefmt:
                stamp += f",{int(now * 1000) % 1000:03d}"  # as logging.Formatter writes it
            try:
                line = spec["format"] % {**fields, "asctime": stamp}
                if spec.get("file"):  # opened anew each time: a log rotated away is not written on
                    with open(spec["file"], "a", encoding="utf-8") as out:
                        out.write(line + "\n")
                else:
                    sys.stderr.write(line + "\n")
                    sys.stderr.flush()
            except (OSError, KeyError, TypeError, ValueError):
                pass  # a line that cannot be written must not stop the supervision

    def info(self, message: str, *args: Any) -> None:
        self._write("INFO", message, args)

    def warning(self, message: str, *args: Any) -> None:
        self._write("WARNING", message, args)

    def error(self, message: str, *args: Any) -> None:
        self._write("ERROR", message, args)


log = _Log("antler.up")


def main() -> int:
    state = json.loads(os.environ.pop(STATE_VARIABLE))
    log.handlers = state["log"]
    supervisor = Supervisor(
        name=state["name"],
        command=state["command"],
        children={int(pid): slot for pid, slot in state["children"].items()},
        started={int(slot): at for slot, at in state["started"].items()},
        quick_death=state["quick_death"],
        max_quick_deaths=state["max_quick_deaths"],
        stopping=state["stopping"],
    )
    for sig in SIGNALS:
        signal.signal(sig, supervisor.forward)
    # The leader blocked these before exec: one that came meanwhile is delivered now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
