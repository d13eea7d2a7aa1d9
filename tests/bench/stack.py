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
import time
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
    # With a cluster (`bench_stack(cluster=3)`): every node, and each one's monitoring port.
    nodes: list[EmbeddedServer] = field(default_factory=list)
    monitor_ports: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Where components connect: the server, or every node of the cluster."""
        return ",".join(node.url for node in self.nodes) if self.nodes else self.server.url

    async def varz(self) -> dict[str, Any]:
        """nats-server's counters (`in_msgs`: every message clients published, acks and API
        requests included), read without a subscription that would itself load the machine; on a
        cluster, `in_msgs` summed over the nodes (routed copies included)."""

        def read(port: int) -> dict[str, Any]:
            url = f"http://127.0.0.1:{port}/varz"
            with urllib.request.urlopen(url, timeout=5) as response:
                return dict(json.load(response))

        found = [await asyncio.to_thread(read, port) for port in self.monitor_ports or [self.monitor_port]]
        return {**found[0], "in_msgs": sum(int(v.get("in_msgs", 0)) for v in found)}

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
                self.url,
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
    cluster: int = 0,
) -> AsyncIterator[BenchStack]:
    """A fresh stack in a temporary directory: `runners` runner processes, then `others`; its
    nats-server fsyncs as `antler up`'s does (`bus.embedded.sync_interval`). With `cluster` (3), that
    many nats-servers clustered on loopback instead (nodes `n1` …, streams and buckets R3), each
    counted as a process of its own (`nats-n1` …)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        monitor_ports = [_free_port() for _ in range(max(1, cluster))]
        route_ports = [_free_port() for _ in range(cluster)]
        routes = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in route_ports)
        servers = [
            EmbeddedServer(
                tmp_path / (f"nats-n{n + 1}" if cluster else "nats"),
                sync_interval=sync_interval,
                server_name=f"n{n + 1}" if cluster else "antler",
                extra_config=f'http: "127.0.0.1:{monitor_ports[n]}"\n'
                + (
                    f'cluster {{\n  name: "bench"\n  listen: "127.0.0.1:{route_ports[n]}"\n'
                    f"  routes: [{routes}]\n}}\n"
                    if cluster
                    else ""
                ),
            )
            for n in range(max(1, cluster))
        ]
        # The model last: components still calling it (the memory updater) stop first, not mid-answer.
        model = FakeOpenAI()
        model.stop_grace = 5  # a call still under way as the benchmark ends is answered, not cut
        async with model as fake, contextlib.AsyncExitStack() as started:
            await asyncio.gather(
                *(server.start(timeout=60) for server in servers)
            )  # peers wait for each other
            for server in servers:
                started.push_async_callback(server.stop)
            server = servers[0]
            prefix = f"bench{uuid.uuid4().hex[:6]}"
            bus_settings: dict[str, Any] = {"prefix": prefix, "data_dir": str(tmp_path / "data")}
            if cluster:
                bus_settings["replicas"] = min(3, cluster)
            config = {
                "bus": bus_settings,
                "models": [{"name": "fake", "model": "m", "api_key": "k", "base_url": fake.base_url}],
                **(settings or {}),
            }
            path = tmp_path / "config.yaml"
            path.write_text(yaml.safe_dump(config))
            url = ",".join(s.url for s in servers)
            if cluster:
                await _jetstream_up(url)
            bus = await connect_and_provision(
                url, BusConfig(prefix=prefix, replicas=bus_settings.get("replicas", 1))
            )
            stack = BenchStack(bus, fake, server, path, tmp_path, monitor_port=monitor_ports[0])
            if cluster:
                stack.nodes, stack.monitor_ports = servers, monitor_ports
                for n, node in enumerate(servers):
                    if node.pid:
                        stack.processes[f"nats-n{n + 1}"] = node.pid
            elif server.pid:
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


async def _jetstream_up(url: str, timeout: float = 60.0) -> None:
    """Until a cluster's JetStream has a meta leader (its nodes answer before they elect one)."""
    import nats

    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            nc = await nats.connect(url.split(","))
            try:
                await nc.jetstream().account_info()
                return
            finally:
                await nc.close()
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster's JetStream did not come up")
        await asyncio.sleep(0.25)


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
