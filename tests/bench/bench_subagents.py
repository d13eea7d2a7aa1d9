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
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import yaml

from bus import Bus, EmbeddedServer
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from config import BusConfig
from tests.bench.bench_chat import start_component
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall


@contextlib.asynccontextmanager
async def component(name: str, config: Path, url: str) -> AsyncIterator[None]:
    proc, _log = await start_component(name, config, url, config.parent)
    try:
        yield
    finally:
        proc.terminate()
        await proc.wait()


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
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedServer(Path(tmp) / "nats") as server, FakeOpenAI() as fake:
            prefix = f"bench{uuid.uuid4().hex[:6]}"
            config = {
                "bus": {"prefix": prefix, "data_dir": str(Path(tmp) / "data")},
                "models": [{"name": "fake", "model": "m", "api_key": "k", "base_url": fake.base_url}],
                "title": {"enabled": False},
            }
            path = Path(tmp) / "config.yaml"
            path.write_text(yaml.safe_dump(config))
            bus = await Bus.connect(server.url, BusConfig(prefix=prefix), provision=True)
            async with component("runner", path, server.url), component("subagents", path, server.url):
                try:
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
                finally:
                    await bus.close()


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench subagents`."""
    await main(args.turns or 5, 0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--model-seconds", type=float, default=0.5)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.model_seconds))
