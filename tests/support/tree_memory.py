"""What the processes below one process hold in memory, sampled from outside them (through /proc).

Tests of the sandbox's memory limit use it to see what a hostile command really took, whatever the
broker's own accounting says: the resident memory of every descendant of `root` whose command line
holds a marker, summed every few milliseconds on a thread of the test's own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (through each thread's `children`)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as handle:
                    children = [int(c) for c in handle.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


class TreeMemory:
    """The resident memory of `root`'s descendants whose command line holds `marker`, summed."""

    def __init__(self, root: int, marker: str) -> None:
        self.root = root
        self.marker = marker.encode()
        self.peak = 0  # bytes, the most seen at once
        self.seen = 0  # samples that found at least one such process
        self._stop = threading.Event()

    def sample(self) -> int:
        total, found = 0, False
        for pid in descendants(self.root):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if self.marker not in handle.read():
                        continue
                with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
                    total += int(handle.read().split()[1]) * PAGE
            except (OSError, ValueError, IndexError):
                continue
            found = True
        self.seen += found
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(0.005)

    @contextmanager
    def sampling(self) -> Iterator[TreeMemory]:
        """Sample on a thread while inside."""
        thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


def hogs(processes: int, mb: int, marker: str) -> str:
    """A shell command starting `processes` Python processes that each touch `mb` MB and hold it for a
    minute (their command lines hold `marker`), then printing `all-done`. Each prints `held` once its
    memory is touched."""
    one = (
        f"python3 -c \"import time; x = b'x' * ({mb} << 20); print('held', flush=True); time.sleep(60)\" "
        f"{marker}"
    )
    return f"for i in $(seq 1 {processes}); do {one} & done; wait; echo all-done"
