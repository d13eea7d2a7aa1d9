"""What the whole stack holds in memory: `antler up` on its defaults, idle and after some turns.

Starts `antler up` as a user would (embedded nats-server, every default component, `runner.processes`
as configured: one per core by default) against the zero-latency scripted model, waits for
"Antler is up", lets it settle and reads every process of the tree, then sends `--turns` chat
turns (`--chats` at once, through `chat.in` -> router -> runners -> `chat.out`, as `antler bench
chat` does), settles again and reads them once more.

Per process it prints three figures from /proc/<pid>/smaps_rollup:

- RSS: every page the process maps that is in memory, shared or not. Summed over processes it
  counts a page shared by several processes (the Python binary, a C extension's code) once per
  process: more than the stack really holds.
- PSS: each page divided by the number of processes mapping it. Summed over the stack's processes
  it is what the stack holds when nothing else maps the same files; other programs on the machine
  running the same Python or libraries take their share, so it can read a little low.
- USS: pages only this process maps: what stopping it would give back.

Before the load it also times `--single` first messages of new chats, one after the other: the
first three are the first turns after start-up.

Run: `antler bench memory [--turns 100] [--chats 5] [--single 10] [--runners 0] [--json out.json]`
(`--no-fork`: runners started one by one, as with `runner.fork_processes: false`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from bus.launcher import login
from config import load_config
from tests.bench.bench_chat import ChatClient, machine
from tests.bench.stack import run_as_script, with_defaults
from tests.fakes.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
UP_TIMEOUT = 120.0
MB = 1024 * 1024


@dataclass
class Footprint:
    name: str
    pid: int
    rss_mb: float
    pss_mb: float
    uss_mb: float


def python_path() -> str:
    """This checkout first, then whatever PYTHONPATH already held."""
    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def smaps_rollup(pid: int) -> dict[str, int]:
    """The kB figures of /proc/<pid>/smaps_rollup (Linux 4.14+), in bytes."""
    figures = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            figures[key] = int(parts[0]) * 1024
    return figures


def minor_faults(pid: int) -> int:
    """Minor page faults of a process so far (/proc/<pid>/stat, field 10)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def process_name(proc: psutil.Process, seen: dict[str, int]) -> str:
    """`antler up`, `nats-server`, `runner-1`, `sandbox` ...: what the process is, from its command
    (`runner leader`: the process the runners were forked from, see antler/forkserver.py; `runner
    forks`: the same, should it supervise them without becoming antler/fork_supervisor.py)."""
    cmd = proc.cmdline()
    if any(part.endswith("fork_supervisor.py") for part in cmd):
        base = "runner leader"  # what the runners were forked from, once it forked them
    elif "run" in cmd and "antler" in cmd:
        base = cmd[cmd.index("run") + 1]
        if any(child.cmdline() == cmd for child in proc.children()):
            return f"{base} forks"
    elif "up" in cmd and "antler" in cmd:
        base = "antler up"
    else:
        base = Path(cmd[0]).name if cmd else proc.name()
    seen[base] = seen.get(base, 0) + 1
    return base if base not in ("runner",) else f"{base}-{seen[base]}"


def footprints(root: int) -> list[Footprint]:
    parent = psutil.Process(root)
    seen: dict[str, int] = {}
    found = []
    for proc in [parent, *parent.children(recursive=True)]:
        with contextlib.suppress(psutil.Error, OSError):
            figures = smaps_rollup(proc.pid)
            uss = figures.get("Private_Clean", 0) + figures.get("Private_Dirty", 0)
            found.append(
                Footprint(
                    process_name(proc, seen),
                    proc.pid,
                    round(figures.get("Rss", 0) / MB, 1),
                    round(figures.get("Pss", 0) / MB, 1),
                    round(uss / MB, 1),
                )
            )
    return found


def print_footprints(label: str, found: list[Footprint]) -> dict[str, float]:
    print(f"{label}:")
    print(f"  {'process':<14} {'pid':>7} {'RSS MB':>8} {'PSS MB':>8} {'USS MB':>8}")
    for f in found:
        print(f"  {f.name:<14} {f.pid:>7} {f.rss_mb:>8.1f} {f.pss_mb:>8.1f} {f.uss_mb:>8.1f}")
    totals = {
        "rss_mb": round(sum(f.rss_mb for f in found), 1),
        "pss_mb": round(sum(f.pss_mb for f in found), 1),
        "uss_mb": round(sum(f.uss_mb for f in found), 1),
    }
    print(f"  {'all':<14} {'':>7} {totals['rss_mb']:>8.1f} {totals['pss_mb']:>8.1f} {totals['uss_mb']:>8.1f}")
    return totals


async def wait_until_up(proc: asyncio.subprocess.Process) -> str:
    """Read `antler up`'s output until it says it is up; the NATS URL it printed."""
    assert proc.stdout is not None
    url = ""
    lines: list[str] = []
    deadline = time.monotonic() + UP_TIMEOUT
    while time.monotonic() < deadline:
        raw = await asyncio.wait_for(proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
        if not raw:
            break
        line = raw.decode(errors="replace").rstrip()
        lines.append(line)
        if line.startswith("NATS: "):
            url = line.removeprefix("NATS: ").strip()
        if "Antler is up" in line:
            return url
    raise RuntimeError("antler up did not come up:\n" + "\n".join(lines[-30:]))


async def drain_output(proc: asyncio.subprocess.Process) -> None:
    """Keep reading `antler up`'s output so it never blocks on a full pipe."""
    assert proc.stdout is not None
    while await proc.stdout.readline():
        pass


async def turns(
    config_path: Path, url: str, count: int, chats: int, single: int
) -> tuple[list[float], float]:
    """`single` first messages of new chats one after the other (their latencies: the first ones
    are the first turns after start-up), then `count` chat turns, `chats` at once (the seconds
    they took)."""
    config = load_config(config_path)
    bus = await login(config).connect(url, "antler-bench-memory", provision=False)
    client = ChatClient(bus)
    await client.start()
    latencies = []
    try:
        for n in range(single):
            latencies.append((await client.turn(f"single-{n}", "hello " * 40)).latency)
    except BaseException:
        await client.stop()
        await bus.close()
        raise
    started = time.perf_counter()
    try:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(count):
            queue.put_nowait(n)

        async def chat(c: int) -> None:
            while not queue.empty():
                n = queue.get_nowait()
                await client.turn(f"mem-{c}", f"turn {n}: " + " ".join(f"word{i}" for i in range(40)))

        await asyncio.gather(*(chat(c) for c in range(chats)))
    finally:
        await client.stop()
        await bus.close()
    return latencies, time.perf_counter() - started


def print_single(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    figures = {
        "first_three_ms": [round(x * 1000, 1) for x in latencies[:3]],
        "median_ms": round(ordered[len(ordered) // 2] * 1000, 1),
        "slowest_ms": round(ordered[-1] * 1000, 1),
    }
    print(
        f"{len(latencies)} chats' first messages, one after the other: the first three after start-up "
        f"{', '.join(f'{x:.1f}' for x in figures['first_three_ms'])} ms; median {figures['median_ms']} ms, "
        f"slowest {figures['slowest_ms']} ms"
    )
    return figures


async def main(args: argparse.Namespace) -> dict[str, Any]:
    info = machine()
    print(
        f"machine: {info['cores']} cores ({info['cpu']}), load average {info['load_average']}; "
        f"Python {info['python']}"
    )
    results: dict[str, Any] = {"label": args.label, "machine": info, "date": time.strftime("%Y-%m-%d %H:%M")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        async with FakeOpenAI() as fake:
            config = {
                "bus": {"data_dir": str(tmp_path / "data")},
                "models": [{"name": "fake", "model": "m", "api_key": "k", "base_url": fake.base_url}],
                "runner": {"processes": args.runners, "fork_processes": not args.no_fork},
                # Building the toolbox takes minutes of pip and does not change what any process holds.
                "sandbox": {"toolbox": {"enabled": False}},
            }
            config_path = tmp_path / "config.yaml"
            config_path.write_text(yaml.safe_dump(config))
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "antler",
                "up",
                "-c",
                str(config_path),
                cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": python_path()},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            reader: asyncio.Task[None] | None = None
            try:
                url = await wait_until_up(proc)
                reader = asyncio.create_task(drain_output(proc))
                await asyncio.sleep(args.settle)
                idle = footprints(proc.pid)
                results["idle"] = [asdict(f) for f in idle]
                label = f"idle, {args.settle:g}s after 'Antler is up'"
                results["idle_totals"] = print_footprints(label, idle)
                if args.turns or args.single:
                    runners = [psutil.Process(f.pid) for f in idle if f.name.startswith("runner-")]
                    before = {p.pid: (minor_faults(p.pid), cpu_seconds(p)) for p in runners}
                    latencies, _ = await turns(config_path, url, 0, args.chats, args.single)
                    if latencies:
                        results["single"] = print_single(latencies)
                        # A page first written after a fork is copied then: a fault each.
                        cost = {
                            str(p.pid): {
                                "minor_faults": minor_faults(p.pid) - before[p.pid][0],
                                "cpu_ms": round(1000 * (cpu_seconds(p) - before[p.pid][1]), 1),
                            }
                            for p in runners
                        }
                        results["runners_during_single"] = cost
                        print(f"the runners meanwhile (minor page faults, CPU): {cost}")
                    _, took = await turns(config_path, url, args.turns, args.chats, 0)
                    await asyncio.sleep(args.settle)
                    after = footprints(proc.pid)
                    results["after"] = [asdict(f) for f in after]
                    results["after_totals"] = print_footprints(
                        f"after {args.single} + {args.turns} turns ({args.chats} chats at once, "
                        f"{took:.1f}s), {args.settle:g}s later",
                        after,
                    )
            finally:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        await asyncio.wait_for(proc.wait(), 60)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
                if reader is not None:
                    reader.cancel()
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps(results, indent=2))
        print(f"figures written to {args.json}")
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=100, help="chat turns between the two readings")
    parser.add_argument("--chats", type=int, default=5, help="chats at once while turning")
    parser.add_argument("--runners", type=int, default=0, help="runner.processes (0: one per core)")
    parser.add_argument("--single", type=int, default=10, help="first messages of chats one at a time")
    parser.add_argument(
        "--no-fork", action="store_true", help="runner.fork_processes false: each runner starts anew"
    )
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait before each reading")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--label", default="", help="a name for this run in the JSON")


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench memory` (options it does not name take the defaults here)."""
    await main(with_defaults(args, add_arguments, known_only=True))


if __name__ == "__main__":
    run_as_script(__doc__, add_arguments, main)
