"""`antler bench`: the performance benchmarks, run from a source checkout.

They drive the real components against a zero-latency scripted model, which
lives with the test fakes (tests/fakes), so the benchmarks need the repository,
not just the installed package.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from pathlib import Path

from antler._common import CliError

BENCHMARKS = {
    "chat": "tests.bench.bench_chat",
    "turns": "tests.bench.bench_turns",
    "subagents": "tests.bench.bench_subagents",
    "deerflow": "tests.bench.bench_deerflow",
    "memory": "tests.bench.bench_memory",
}


async def bench(args: argparse.Namespace) -> int:
    repo = await asyncio.to_thread(lambda: Path(args.repo).resolve())
    if not await asyncio.to_thread((repo / "tests" / "bench").is_dir):
        raise CliError(
            f"no benchmarks under {repo}/tests/bench: run antler bench from the repository", code=2
        )
    sys.path.insert(0, str(repo))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))
    module = importlib.import_module(BENCHMARKS[args.name])
    await module.run_from_args(args)
    return 0
