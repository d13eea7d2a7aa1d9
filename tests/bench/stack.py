"""What every benchmark starts: an embedded nats-server, the scripted model, a config pointing at
both, and Antler's components as their own processes (as `antler up` runs them).

    async with bench_stack({"memory": {"enabled": True}}, runners=2, others=["router"]) as stack:
        stack.bus, stack.fake, stack.processes  # the admin bus, the model, pid by name

A component that dies during the benchmark leaves its last log lines on stderr when the stack ends
with an error, so a failed benchmark says why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bus import Bus, EmbeddedServer, connect_and_provision
from config import BusConfig
from tests.fakes.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parents[2]


@dataclass
class BenchStack:
    bus: Bus
    fake: FakeOpenAI
    server: EmbeddedServer
    config_path: Path
    tmp: Path
    processes: dict[str, int] = field(default_factory=dict)  # name -> pid, nats-server included
    children: list[tuple[str, asyncio.subprocess.Process, Path]] = field(default_factory=list)
    monitor_port: int = 0  # nats-server's monitoring endpoint (/varz): what the server counted

    async def varz(self) -> dict[str, Any]:
        """nats-server's counters (`in_msgs`: every message clients published, acks and API
        requests included), read without a subscription that would itself load the machine."""

        def read() -> dict[str, Any]:
            url = f"http://127.0.0.1:{self.monitor_port}/varz"
            with urllib.request.urlopen(url, timeout=5) as response:
                return dict(json.load(response))

        return await asyncio.to_thread(read)

    async def start(self, name: str, label: str | None = None) -> asyncio.subprocess.Process:
        """Start `antler run <name>` with the stack's config; its stderr goes to a log of its own."""
        log_path = self.tmp / f"{label or name}-{uuid.uuid4().hex[:4]}.log"
        with log_path.open("wb") as log_file:
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "antler",
                "run",
                name,
                "-c",
                str(self.config_path),
                "--nats-url",
                self.server.url,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=asyncio.subprocess.DEVNULL,
                stderr=log_file,
            )
        self.children.append((label or name, child, log_path))
        self.processes[label or name] = child.pid
        return child

    def print_logs(self) -> None:
        for name, _, log in self.children:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"--- {name} log (last lines):\n" + "\n".join(tail), file=sys.stderr)

    async def stop(self) -> None:
        for _, child, _ in self.children:
            if child.returncode is None:
                child.terminate()
        for _, child, _ in self.children:
            await child.wait()


@contextlib.asynccontextmanager
async def bench_stack(
    settings: dict[str, Any] | None = None,
    *,
    runners: int = 1,
    others: Sequence[str] = (),
    sync_interval: str = "always",
) -> AsyncIterator[BenchStack]:
    """A fresh stack in a temporary directory: `runners` runner processes, then `others`; its
    nats-server fsyncs as `antler up`'s does (`bus.embedded.sync_interval`)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        monitor_port = _free_port()
        server = EmbeddedServer(
            tmp_path / "nats",
            sync_interval=sync_interval,
            extra_config=f'http: "127.0.0.1:{monitor_port}"\n',
        )
        async with server, FakeOpenAI() as fake:
            prefix = f"bench{uuid.uuid4().hex[:6]}"
            config = {
                "bus": {"prefix": prefix, "data_dir": str(tmp_path / "data")},
                "models": [{"name": "fake", "model": "m", "api_key": "k", "base_url": fake.base_url}],
                **(settings or {}),
            }
            path = tmp_path / "config.yaml"
            path.write_text(yaml.safe_dump(config))
            bus = await connect_and_provision(server.url, BusConfig(prefix=prefix))
            stack = BenchStack(bus, fake, server, path, tmp_path, monitor_port=monitor_port)
            if server.pid:
                stack.processes["nats-server"] = server.pid
            try:
                for n in range(runners):
                    await stack.start("runner", f"runner-{n + 1}")
                for name in others:
                    await stack.start(name)
                yield stack
            except BaseException:
                stack.print_logs()
                raise
            finally:
                await stack.stop()
                await bus.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def with_defaults(
    args: argparse.Namespace,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    known_only: bool = False,
) -> argparse.Namespace:
    """`antler bench <name>`'s `args` (None where not given) over the defaults of the benchmark's own
    options (`add_arguments`); with `known_only`, only the options the benchmark names."""
    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    settings = vars(defaults.parse_args([]))
    given = {k: v for k, v in vars(args).items() if v is not None and (not known_only or k in settings)}
    return argparse.Namespace(**{**settings, **given})


def run_as_script(
    doc: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    main: Callable[[argparse.Namespace], Awaitable[None]],
) -> None:
    """`python -m tests.bench.<name>`: the benchmark's options parsed from the command line."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    asyncio.run(main(parser.parse_args()))


async def sample_with_pyspy(pid: int, *options: str) -> None:
    """With ANTLER_BENCH_PYSPY=out.txt, py-spy samples process `pid` into that file (until it exits)."""
    out = os.environ.get("ANTLER_BENCH_PYSPY")
    if out:
        await asyncio.create_subprocess_exec(
            "py-spy", "record", "-p", str(pid), "-o", out, "--format", "raw", *options, "-r", "200",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
