"""Antler beside DeerFlow, in one run, on one machine, against the same scripted model.

DeerFlow's side is its embedded client (`deerflow.client.DeerFlowClient.chat`, in process: no
gateway, no LangGraph server), in a Python that has DeerFlow's backend installed — you install it
from DeerFlow's repository as its README says and pass that interpreter:

    antler bench deerflow --deerflow-python ~/deer-flow/backend/.venv/bin/python

Antler's side is its chat path as a chat user meets it (chat.in -> router -> runner processes ->
final chat.out), started as `antler bench chat` starts it. Both talk to one scripted, zero-latency
OpenAI-compatible model over HTTP (tests/fakes), with memory and titles on for both. DeerFlow runs
in a child process fed commands on stdin by a small driver written here (it runs DeerFlow, it does
not build or change it).

Each round measures, DeerFlow then Antler (rounds interleave, so a slow patch of the machine hits
both): `--sequential` single turns one after another (each a new chat: median, slowest, the
slowest over the median), then `--chats` new chats at once (turns/s; DeerFlow's sync `chat()` on
that many threads). The ratios print at the end, medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from antler.pool import process_count
from tests.bench.bench_chat import ChatClient, machine, warm_up
from tests.bench.stack import bench_stack, run_as_script, with_defaults
from tests.fakes.openai_server import Pace

DRIVER = r"""
import json, os, sys, time, uuid
from concurrent.futures import ThreadPoolExecutor

from deerflow.client import DeerFlowClient

client = DeerFlowClient(config_path=sys.argv[1], thinking_enabled=False)

def turn(text):
    started = time.perf_counter()
    client.chat(text, thread_id=str(uuid.uuid4()))
    return time.perf_counter() - started

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["op"] == "sequential":
        result = {"latencies": [turn(command["text"]) for _ in range(command["turns"])]}
    elif command["op"] == "concurrent":
        started = time.perf_counter()
        with ThreadPoolExecutor(command["chats"]) as pool:
            latencies = list(pool.map(turn, [command["text"]] * command["chats"]))
        result = {"latencies": latencies, "seconds": time.perf_counter() - started}
    else:
        break
    print(json.dumps(result), flush=True)
"""


# DeerFlow wraps every user message in these lines before the model sees it (its
# InputSanitizationMiddleware, always on); the scripted model echoes the words inside, as it echoes
# the words inside Antler's untrusted-content fences, so both sides get the same answer (the same
# number of streamed tokens) for the same message.
DEERFLOW_INPUT_MARKERS = re.compile(r"\A--- BEGIN USER INPUT ---\n(.*)\n--- END USER INPUT ---\Z", re.S)


def echo_inside_deerflow_markers(fake: Any) -> None:
    """The fake model answers a DeerFlow request as if its user message were not wrapped."""
    choose = fake._choose

    def unwrapped(body: dict[str, Any]) -> Any:
        messages = body.get("messages", [])
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "user":
                content = messages[i].get("content")
                if isinstance(content, str) and (inside := DEERFLOW_INPUT_MARKERS.match(content)):
                    plain = {**messages[i], "content": inside.group(1)}
                    body = {**body, "messages": [*messages[:i], plain, *messages[i + 1 :]]}
                break
        return choose(body)

    fake._choose = unwrapped


def deerflow_config(model_url: str, home: Path) -> dict[str, Any]:
    """DeerFlow's config.yaml for the bench: the scripted model, the local sandbox, memory and titles
    on (as Antler's side has them), nothing that calls out."""
    return {
        "config_version": 34,
        "log_level": "warning",
        "models": [
            {
                "name": "fake",
                "use": "langchain_openai:ChatOpenAI",
                "model": "m",
                "api_key": "k",
                "base_url": model_url,
                "max_retries": 0,
            }
        ],
        "tools": [],
        "sandbox": {"use": "deerflow.sandbox.local:LocalSandboxProvider"},
        "title": {"enabled": True},
        "memory": {"enabled": True, "storage_path": str(home / "memory.json")},
        "suggestions": {"enabled": False},
    }


class DeerFlow:
    """DeerFlow's embedded client in a child process, answering one command per line."""

    def __init__(self, python: str, config: Path, cwd: Path) -> None:
        self.python, self.config, self.cwd = python, config, cwd
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        driver = self.cwd / "deerflow_driver.py"
        await asyncio.to_thread(driver.write_text, DRIVER)
        self.proc = await asyncio.create_subprocess_exec(
            self.python,
            str(driver),
            str(self.config),
            cwd=self.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=await asyncio.to_thread((self.cwd / "deerflow.log").open, "wb"),
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.cwd), "DEER_FLOW_HOME": str(self.cwd)},
        )
        ready = await self._read(300)
        if not ready.get("ready"):
            raise RuntimeError(f"DeerFlow's driver did not start: {ready}")

    async def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            log = (self.cwd / "deerflow.log").read_text(errors="replace").splitlines()[-20:]
            raise RuntimeError("DeerFlow's driver ended:\n" + "\n".join(log))
        return json.loads(line)

    async def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc is not None
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        await self.proc.stdin.drain()
        return await self._read(600)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


def sequential_figures(latencies: list[float]) -> dict[str, float]:
    median = statistics.median(latencies)
    return {
        "median_ms": round(median * 1000, 1),
        "slowest_ms": round(max(latencies) * 1000, 1),
        "slowest_over_median": round(max(latencies) / median, 2),
    }


async def antler_sequential(client: ChatClient, turns: int, text: str) -> list[float]:
    return [(await client.turn(f"seq-{uuid.uuid4().hex[:8]}", text)).latency for _ in range(turns)]


async def antler_concurrent(client: ChatClient, chats: int, text: str) -> tuple[list[float], float]:
    started = time.perf_counter()
    done = await asyncio.gather(*(client.turn(f"new-{uuid.uuid4().hex[:8]}", text) for _ in range(chats)))
    return [t.latency for t in done], time.perf_counter() - started


async def main(args: argparse.Namespace) -> dict[str, Any]:
    runners = process_count(args.runners)
    pace = Pace(args.first_token_ms / 1000, args.token_interval_ms / 1000) if args.model == "paced" else None
    # The model echoes "You said: <message>", a word a token.
    words = args.answer_tokens - 2 if pace is not None else args.words
    text = " ".join(f"word{i}" for i in range(words))
    model = (
        f"one paced model for both (first token after {args.first_token_ms:g} ms, then one every "
        f"{args.token_interval_ms:g} ms, {words + 2} tokens)"
        if pace is not None
        else "one scripted zero-latency model for both"
    )
    info = machine()
    print(f"machine: {info['cores']} cores ({info['cpu']}), load average {info['load_average']}")
    print(
        f"DeerFlow: DeerFlowClient.chat() in {args.deerflow_python}; Antler: chat.in -> router -> "
        f"runner ({runners} processes) -> chat.out; {model}"
    )
    rounds: list[dict[str, Any]] = []
    settings = {"title": {"enabled": True}, "memory": {"enabled": True}}
    async with bench_stack(settings, runners=runners, others=["router"]) as stack:
        with tempfile.TemporaryDirectory() as home:
            home_path = Path(home)
            config = home_path / "config.yaml"
            await asyncio.to_thread(
                config.write_text, yaml.safe_dump(deerflow_config(stack.fake.base_url, home_path))
            )
            deerflow = DeerFlow(args.deerflow_python, config, home_path)
            stack.fake.pace = pace
            echo_inside_deerflow_markers(stack.fake)
            client = ChatClient(stack.bus, pace)
            await client.start()
            try:
                await deerflow.start()
                await deerflow.ask(op="sequential", turns=3, text="hello")  # its agent is built
                await warm_up(client, 5)
                for n in range(args.rounds):
                    df_seq = await deerflow.ask(op="sequential", turns=args.sequential, text=text)
                    df_many = await deerflow.ask(op="concurrent", chats=args.chats, text=text)
                    an_seq = await antler_sequential(client, args.sequential, text)
                    _, an_seconds = await antler_concurrent(client, args.chats, text)
                    result = {
                        "deerflow": {
                            "sequential": sequential_figures(df_seq["latencies"]),
                            "turns_per_s": round(args.chats / df_many["seconds"], 1),
                        },
                        "antler": {
                            "sequential": sequential_figures(an_seq),
                            "turns_per_s": round(args.chats / an_seconds, 1),
                        },
                    }
                    rounds.append(result)
                    d, a = result["deerflow"], result["antler"]
                    print(
                        f"round {n + 1}: single turn median DeerFlow {d['sequential']['median_ms']} ms, "
                        f"Antler {a['sequential']['median_ms']} ms (slowest/median: "
                        f"{d['sequential']['slowest_over_median']}x, "
                        f"{a['sequential']['slowest_over_median']}x); "
                        f"{args.chats} new chats at once: DeerFlow {d['turns_per_s']} turns/s, "
                        f"Antler {a['turns_per_s']} turns/s"
                    )
            finally:
                await client.stop()
                await deerflow.stop()
    summary = summarize(rounds)
    print(
        f"medians over {len(rounds)} rounds: a single turn takes {summary['single_turn_ratio']}x DeerFlow's; "
        f"{args.chats} new chats at once give {summary['throughput_ratio']}x DeerFlow's turns/s; "
        f"Antler's slowest of {args.sequential} sequential turns is {summary['antler_slowest_over_median']}x "
        f"its median (DeerFlow: {summary['deerflow_slowest_over_median']}x)"
    )
    results = {"machine": info, "runners": runners, "rounds": rounds, "summary": summary}
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps(results, indent=2))
    return results


def summarize(rounds: list[dict[str, Any]]) -> dict[str, float]:
    def median(side: str, *path: str) -> float:
        values = []
        for r in rounds:
            value: Any = r[side]
            for key in path:
                value = value[key]
            values.append(float(value))
        return statistics.median(values)

    return {
        "single_turn_ratio": round(
            median("antler", "sequential", "median_ms") / median("deerflow", "sequential", "median_ms"), 2
        ),
        "throughput_ratio": round(median("antler", "turns_per_s") / median("deerflow", "turns_per_s"), 2),
        # (the median of an even count of rounds is a mean: 1.2149999999999999 unrounded)
        "antler_slowest_over_median": round(median("antler", "sequential", "slowest_over_median"), 2),
        "deerflow_slowest_over_median": round(median("deerflow", "sequential", "slowest_over_median"), 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deerflow-python", help="a Python with DeerFlow's backend installed")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sequential", type=int, default=50, help="single turns one after another")
    parser.add_argument("--chats", type=int, default=50, help="new chats at once")
    parser.add_argument("--words", type=int, default=40, help="instant model: words per message")
    parser.add_argument("--model", choices=["paced", "instant"], default="paced")
    parser.add_argument("--first-token-ms", type=float, default=300.0)
    parser.add_argument("--token-interval-ms", type=float, default=15.0)
    parser.add_argument("--answer-tokens", type=int, default=60)
    parser.add_argument("--runners", type=int, default=2, help="Antler's runner processes")
    parser.add_argument("--json", help="write the figures to this file")


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench deerflow --deerflow-python PATH`."""
    settings = with_defaults(args, add_arguments)
    if not settings.deerflow_python:
        print(
            "antler bench deerflow needs --deerflow-python (a Python with DeerFlow installed)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    await main(settings)


if __name__ == "__main__":
    run_as_script(__doc__, add_arguments, main)
