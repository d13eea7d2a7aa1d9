"""What the adapter tests share: copies of an adapter as processes; and from `tests.support.adapters`
the fake platforms, `start_adapter`, and the Telegram and Slack stacks as fixtures."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from tests.conftest import REPO
from tests.support.adapters import (  # noqa: F401  (fixtures)
    dingtalk,
    discord,
    feishu,
    slack,
    slack_stack,
    start_adapter,
    telegram,
    telegram_stack,
    wechat,
    wecom,
)


@contextlib.asynccontextmanager
async def adapter_processes(
    config: Path, nats_url: str, logs: Path, count: int, platform: str = "telegram"
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """`count` `antler run <platform>` processes (stderr to files: a pipe nobody reads would fill up)."""
    procs = []
    try:
        for n in range(count):
            with (logs / f"{platform}-{n}.log").open("wb") as log:
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "antler",
                        "run",
                        platform,
                        "-c",
                        str(config),
                        "--nats-url",
                        nats_url,
                        cwd=REPO,
                        env={**os.environ, "PYTHONPATH": str(REPO)},
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=log,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        await asyncio.gather(*(asyncio.wait_for(p.wait(), 30) for p in procs), return_exceptions=True)
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
