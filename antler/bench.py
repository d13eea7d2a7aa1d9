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


def add_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`antler bench` and its flags."""
    p = sub.add_parser(
        "bench",
        help="run a performance benchmark (from a source checkout)",
        description="Measure through the bus against a scripted model over HTTP, the components in "
        "processes of their own. chat: the chat path end to end (chat.in -> router -> runners -> "
        "chat.out): latency percentiles, turns/s and CPU per process over 10/50/200 chats at once. "
        "turns: runs only (RunRequest in, run events out). subagents: a lead turn with one subagent "
        "against one with three at once. deerflow: Antler beside DeerFlow's in-process chat() against "
        "the same model, in interleaved rounds (needs --deerflow-python). memory: `antler up` on its "
        "defaults, RSS/PSS/USS of every process idle and after --turns chat turns.",
    )
    p.add_argument(
        "name",
        nargs="?",
        default="turns",
        choices=["chat", "turns", "subagents", "deerflow", "memory"],
        help="which benchmark (default: turns)",
    )
    p.add_argument("--chats", type=int, default=50, help="chats at once for the throughput part (default 50)")
    p.add_argument(
        "--turns", type=int, default=None, help="turns measured (default: 300 for turns, 5 for subagents)"
    )
    p.add_argument("--warmup", type=int, default=5, help="turns before measuring (default 5)")
    p.add_argument(
        "--runners", type=int, default=0, help="runner processes (default 0: as many as antler up starts)"
    )
    p.add_argument("--repo", default=".", help="the repository checkout (default: this directory)")
    p.add_argument("--levels", default="10,50,200", help="chat: chats at once, comma separated")
    p.add_argument("--single", type=int, default=20, help="chat: chats in the single-turn part")
    p.add_argument("--words", type=int, default=40, help="chat: words per message (the model echoes them)")
    p.add_argument(
        "--model",
        choices=["paced", "instant"],
        default=None,
        help="chat, deerflow: paced (default), the model streams as a real one; instant: it answers at once",
    )
    p.add_argument(
        "--first-token-ms", type=float, default=None, help="paced model: time to first token (300)"
    )
    p.add_argument(
        "--token-interval-ms", type=float, default=None, help="paced model: time between tokens (15)"
    )
    p.add_argument("--answer-tokens", type=int, default=None, help="paced model: tokens per answer (60)")
    p.add_argument("--repeat", type=int, default=1, help="chat: measure every level this many times")
    p.add_argument(
        "--routers", type=int, default=1, help="chat: router processes (they share the partitions)"
    )
    p.add_argument("--json", help="chat: write the figures to this JSON file")
    p.add_argument("--compare", help="chat: an earlier --json file to compare with")
    p.add_argument("--label", default="", help="chat: a name for this run in the JSON")
    p.add_argument(
        "--sync-interval",
        default=None,
        help="chat: the nats-server's JetStream sync_interval (default always, as antler up; 2m is "
        "nats-server's own default)",
    )
    p.add_argument(
        "--timeline",
        action="store_true",
        help="chat: print every bus message of one follow-up turn, with its time since the message was sent",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        default=None,
        help="chat: each turn's run followed live, as a web UI follows it (its text sent live as it "
        "streams); without it, as a chat platform's: stored four times a second, nothing live",
    )
    p.add_argument(
        "--cluster",
        type=int,
        default=None,
        help="chat: this many nats-servers clustered on this machine (3: R3), each node's CPU share shown",
    )
    p.add_argument(
        "--no-fork", action="store_true", default=None, help="memory: runners started one by one, not forked"
    )
    p.add_argument(
        "--deerflow-python", help="deerflow: a Python interpreter with DeerFlow's backend installed"
    )
    p.add_argument("--rounds", type=int, default=None, help="deerflow: interleaved rounds (default 4)")
    p.add_argument(
        "--sequential", type=int, default=None, help="deerflow: single turns per round (default 50)"
    )


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
