"""A lead turn that delegates to subagents: do three run side by side, or one after another?

Each turn: the lead model asks for N `task` calls at once, each subagent's model
takes `--model-seconds` to answer (the scripted model waits that long), then the
lead answers. The runner and the subagent executor are processes of their own,
as `antler up` runs them. Prints the median turn for one subagent and for three;
parallel subagents make the second close to the first, not three times it.
Run: `python -m tests.bench.bench_subagents [--turns 5] [--model-seconds 0.5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from tests.bench.stack import bench_stack
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall


async def one_turn(bus: Bus, fake: FakeOpenAI, subagents: int, model_seconds: float) -> float:
    tag = uuid.uuid4().hex[:8]
    calls = [
        ToolCall("task", {"description": f"part {n}", "prompt": f"Part {n} of {tag}"})
        for n in range(subagents)
    ]
    fake.script(
        Reply(tool_calls=calls, when=f"job {tag}"),
        *[
            Reply(text=f"result {n} of {tag}", when=f"Part {n} of {tag}", delay=model_seconds)
            for n in range(subagents)
        ],
        Reply(text="all parts done", when=f"result {subagents - 1} of {tag}"),
    )
    request = RunRequest(
        thread_id=f"bench-{tag}",
        input={"messages": [{"role": "user", "content": f"Do the job {tag}"}]},
        stream_mode=["values"],
        context={"subagent_enabled": True},
    )
    started = time.perf_counter()
    follower = asyncio.create_task(collect_run(bus, request.run_id, timeout=120))
    await submit_run(bus, request)
    events = await follower
    if events[-1].data.get("status") != "success":
        raise RuntimeError(f"the turn did not succeed: {events[-1]}")
    return time.perf_counter() - started


async def main(turns: int, model_seconds: float) -> None:
    async with bench_stack({"title": {"enabled": False}}, runners=1, others=["subagents"]) as stack:
        bus, fake = stack.bus, stack.fake
        await one_turn(bus, fake, 1, 0)  # warm up: both processes compile their agents
        results = {}
        for subagents in (1, 3):
            times = [await one_turn(bus, fake, subagents, model_seconds) for _ in range(turns)]
            results[subagents] = statistics.median(times)
            print(
                f"{subagents} subagent(s), each model answer {model_seconds:g}s: "
                f"median turn {results[subagents] * 1000:.0f} ms"
            )
        print(f"three side by side take {results[3] / results[1]:.2f}x one (sequential: ~3x)")


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench subagents`."""
    await main(args.turns or 5, 0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--model-seconds", type=float, default=0.5)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.model_seconds))
