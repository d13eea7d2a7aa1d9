"""Checkpoint files on a fresh data dir: every process that opens one at start-up gets it ready."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

ROUNDS, PROCESSES = 3, 4

# One process loads the saver, then forks four processes per round that open that round's fresh
# file at the same moment (as `antler up` forks its runner processes from one that loaded them):
# each round is four processes with connections of their own, at the cost of one import, not four.
_OPEN_TOGETHER = """
import asyncio, os, sys, time, traceback
from agents.sqlite_saver import ThreadedSqliteSaver

async def put(path: str, thread: str) -> None:
    async with ThreadedSqliteSaver.open(path) as saver:
        await saver.aput(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            {"v": 1, "id": thread, "ts": "2026-01-01T00:00:00+00:00", "channel_values": {},
             "channel_versions": {}, "versions_seen": {}},
            {}, {},
        )

failed = False
for path in sys.argv[2:]:
    at = time.time() + 0.3  # every process opens the fresh file at the same moment
    pids = []
    for n in range(int(sys.argv[1])):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                time.sleep(max(at - time.time(), 0))
                asyncio.run(put(path, f"thread-{n}"))
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    failed |= any(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids)
sys.exit(1 if failed else 0)
"""


def test_processes_opening_a_fresh_checkpoint_file_together_all_start(tmp_path: Path) -> None:
    """Runner processes and the subagent executor start side by side on a fresh data dir: none fails
    creating the tables (seen as a SQLite OperationalError in about one start in six)."""
    paths = [tmp_path / f"round{round_}" / "checkpoints.sqlite" for round_ in range(ROUNDS)]
    for path in paths:
        path.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_TOGETHER, str(PROCESSES), *map(str, paths)],
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    for path in paths:
        with SqliteSaver.from_conn_string(str(path)) as saver:
            found = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert found == {f"thread-{n}" for n in range(PROCESSES)}, path
