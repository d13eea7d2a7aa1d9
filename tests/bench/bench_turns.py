"""Chat turns through the bus: latency of one turn, and throughput with many chats at once.

A turn = publish a RunRequest, the runner (its own process) runs the lead agent
against a zero-latency scripted model over HTTP, and the client reads the run's
events up to `end`. Run: `python -m tests.bench.bench_turns [--chats 50] [--turns 300]`.
With ANTLER_BENCH_PYSPY=out.txt (and py-spy installed) the runner is sampled meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from antler.pool import process_count
from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from tests.bench.stack import bench_stack, sample_with_pyspy

REPO = Path(__file__).resolve().parents[2]


async def one_turn(bus: Bus, thread_id: str, text: str) -> float:
    request = RunRequest(
        thread_id=thread_id,
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=["messages-tuple"],
    )
    started = time.perf_counter()
    follower = asyncio.create_task(collect_run(bus, request.run_id, timeout=60))
    await submit_run(bus, request)
    events = await follower
    assert events[-1].event == "end", events[-1]
    return time.perf_counter() - started


async def main(chats: int, turns: int, warmup: int, runners: int) -> None:
    settings = {"title": {"enabled": True}, "memory": {"enabled": True}}
    async with bench_stack(settings, runners=runners) as stack:
        bus = stack.bus
        print(f"{runners} runner process(es), as `antler up` starts them here (runner.processes)")
        await sample_with_pyspy(stack.processes["runner-1"])  # the runner, while the benchmark runs
        for i in range(warmup):
            await one_turn(bus, f"warm-{i}", "hello")
        latencies = [await one_turn(bus, f"seq-{i}", "hello there") for i in range(30)]
        print(
            f"single turn: median {statistics.median(latencies) * 1000:.1f} ms, "
            f"p90 {sorted(latencies)[int(len(latencies) * 0.9)] * 1000:.1f} ms"
        )

        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(turns):
            queue.put_nowait(i)
        done: list[float] = []

        async def chat(n: int) -> None:
            while not queue.empty():
                i = queue.get_nowait()
                done.append(await one_turn(bus, f"chat-{n}", f"message {i}"))

        started = time.perf_counter()
        await asyncio.gather(*(chat(n) for n in range(chats)))
        elapsed = time.perf_counter() - started
        print(
            f"{chats} chats at once: {len(done) / elapsed:.1f} turns/s "
            f"(median turn {statistics.median(done) * 1000:.0f} ms, {len(done)} turns)"
        )


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench turns`."""
    await main(args.chats, args.turns or 300, args.warmup, process_count(args.runners))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runners", type=int, default=0, help="runner processes (0: as antler up starts)")
    args = parser.parse_args()
    asyncio.run(main(args.chats, args.turns, args.warmup, process_count(args.runners)))
