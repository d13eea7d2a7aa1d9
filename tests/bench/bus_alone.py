"""The bus alone: how many JetStream publishes (stored, acknowledged) and KV writes one nats-server
takes on this machine, from `--clients` client processes at once. For docs/scaling.md's capacity
model; the Python clients are the limit long before the server on a small machine, so the figure is
a floor for the server.

    python -m tests.bench.bus_alone --clients 2 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import nats
import psutil
from nats.js.api import KeyValueConfig, StorageType, StreamConfig

from bus.server import EmbeddedServer

PAYLOAD = b"x" * 600  # about a run event's size (a few streamed words and their envelope)
IN_FLIGHT = 256  # unacknowledged publishes per client


async def _client(url: str, kind: str, seconds: float, counter: multiprocessing.Value) -> None:  # type: ignore[type-arg]
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.key_value("bench") if kind == "kv" else None
    deadline = time.monotonic() + seconds
    done = 0
    pending: set[asyncio.Future[object]] = set()
    n = 0
    while time.monotonic() < deadline:
        while len(pending) < IN_FLIGHT:
            n += 1
            if kv is not None:
                pending.add(asyncio.ensure_future(kv.put(f"k{os.getpid()}.{n % 1000}", PAYLOAD)))
            else:
                pending.add(asyncio.ensure_future(js.publish(f"bench.{n % 64}", PAYLOAD)))
        finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        done += len(finished)
    await asyncio.gather(*pending, return_exceptions=True)
    with counter.get_lock():
        counter.value += done
    await nc.close()


def _run_client(url: str, kind: str, seconds: float, counter: multiprocessing.Value) -> None:  # type: ignore[type-arg]
    asyncio.run(_client(url, kind, seconds, counter))


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedServer(Path(tmp) / "nats") as server:
            nc = await nats.connect(server.url)
            js = nc.jetstream()
            await js.add_stream(StreamConfig(name="BENCH", subjects=["bench.>"], storage=StorageType.FILE))
            await js.create_key_value(KeyValueConfig(bucket="bench", history=1, storage=StorageType.FILE))
            await nc.close()
            proc = psutil.Process(server.pid)
            for kind in ("publish", "kv"):
                counter = multiprocessing.Value("q", 0)
                cpu_before = sum(proc.cpu_times()[:2])
                began = time.monotonic()
                workers = [
                    multiprocessing.Process(
                        target=_run_client, args=(server.url, kind, args.seconds, counter)
                    )
                    for _ in range(args.clients)
                ]
                for worker in workers:
                    worker.start()
                await asyncio.gather(*(asyncio.to_thread(w.join) for w in workers))
                elapsed = time.monotonic() - began
                cpu = sum(proc.cpu_times()[:2]) - cpu_before
                rate = counter.value / elapsed
                each = 1e6 * cpu / max(counter.value, 1)
                print(
                    f"{kind:8s} {rate:9.0f}/s from {args.clients} clients ({len(PAYLOAD)} B, file, R1); "
                    f"nats-server {cpu / elapsed:.2f} cores, {each:.0f} µs CPU each"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    asyncio.run(main(parser.parse_args()))
