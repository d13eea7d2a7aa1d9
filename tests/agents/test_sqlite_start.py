"""Checkpoint files on a fresh data dir: every process that opens one at start-up gets it ready."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

_OPEN_AT = """
import asyncio, sys, time
from agents.sqlite_saver import ThreadedSqliteSaver

async def main(path: str, at: float) -> None:
    time.sleep(max(at - time.time(), 0))  # every process opens the fresh file at the same moment
    async with ThreadedSqliteSaver.open(path) as saver:
        await saver.aput(
            {"configurable": {"thread_id": sys.argv[3], "checkpoint_ns": ""}},
            {"v": 1, "id": sys.argv[3], "ts": "2026-01-01T00:00:00+00:00", "channel_values": {},
             "channel_versions": {}, "versions_seen": {}},
            {}, {},
        )

asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


def test_processes_opening_a_fresh_checkpoint_file_together_all_start(tmp_path: Path) -> None:
    """Runner processes and the subagent executor start side by side on a fresh data dir: none fails
    creating the tables (seen as a SQLite OperationalError in about one start in six)."""
    for round_ in range(3):
        path = tmp_path / f"round{round_}" / "checkpoints.sqlite"
        path.parent.mkdir()
        at = time.time() + 1.5
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_AT, str(path), str(at), f"thread-{n}"],
                stderr=subprocess.PIPE,
                cwd=Path(__file__).resolve().parents[2],
            )
            for n in range(4)
        ]
        errors = [p.communicate(timeout=60)[1].decode() for p in procs]
        assert all(p.returncode == 0 for p in procs), "\n".join(errors)
        with SqliteSaver.from_conn_string(str(path)) as saver:
            found = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
        assert found == {f"thread-{n}" for n in range(4)}
