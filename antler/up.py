"""`antler up`: embedded nats-server plus every component, in one process, until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from antler._common import CliError, load, login, nats_url, setup_logging, status
from antler.components import COMPONENTS, resolve_component
from antler.pool import kill_children, process_count, runner_pool
from bus import Bus, ComponentEntry, ComponentFailed, EmbeddedServer, ServerError, serve, stop_on_signals
from bus.permissions import USERS_FILE, save_users, server_block, users_for
from bus.subjects import Subjects
from config import AppConfig

log = logging.getLogger("antler.up")
# Longer than a runner child's stop grace (antler.pool.STOP_GRACE): every child is stopped before we exit.
DRAIN_TIMEOUT = 30.0


def own_connection(url: str, config: AppConfig, name: str, entry: ComponentEntry) -> ComponentEntry:
    """Give a component its own NATS connection (as its own user), as it would have in its own process."""

    async def run(_bus: Bus, _config: Any) -> None:
        bus = await login(config, name).connect(url, f"antler-{name}", provision=False)
        try:
            await entry(bus, config)
        finally:
            await bus.close()

    return run


def enabled_components(config: AppConfig) -> dict[str, ComponentEntry]:
    found: dict[str, ComponentEntry] = {}
    for spec in COMPONENTS.values():
        if spec.enabled(config):
            name, entry = resolve_component(spec.name)
            found[name] = entry
    return found


async def announce_gateway(config: AppConfig) -> None:
    """Print the gateway's URL once it listens (it writes the URL it bound to the data dir)."""
    url_file = Path(config.bus.data_dir) / "gateway.url"
    for _ in range(600):
        if await asyncio.to_thread(url_file.is_file):
            url = (await asyncio.to_thread(url_file.read_text, encoding="utf-8")).strip()
            print(f"Gateway: {url}  (API: {url}/api, docs: {url}/docs)", flush=True)
            return
        await asyncio.sleep(0.05)


async def supervise(server: EmbeddedServer, stop: asyncio.Event) -> None:
    """Restart the embedded nats-server when it dies; stop everything if it cannot be kept up."""
    try:
        await server.supervise()
    except ServerError as exc:
        log.error("the embedded nats-server cannot be kept running: %s", exc)
        stop.set()
        raise


async def up(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    stop = asyncio.Event()
    undo_signals = stop_on_signals(stop)
    server: EmbeddedServer | None = None
    supervisor: asyncio.Task[None] | None = None
    try:
        if config.bus.url or args.nats_url:
            url = nats_url(args, config)
            status(f"using NATS at {url}")
        else:
            emb = config.bus.embedded
            authorization = None
            if emb.component_users:
                users_file = Path(config.bus.data_dir) / USERS_FILE
                users = users_for(Subjects(config.bus.prefix), users_file)
                save_users(users_file, users)
                authorization = server_block(users)
            server = EmbeddedServer(
                config.bus.data_dir,
                host=emb.host,
                port=emb.port,
                max_payload_mb=emb.max_payload_mb,
                authorization=authorization,
            )
            status(f"starting nats-server (JetStream in {server.data_dir / 'jetstream'}) ...")
            try:
                url = await server.start()
            except ServerError as exc:
                raise CliError(str(exc)) from None
            status(f"nats-server running (pid {server.pid}; log: {server.log_path})")
            supervisor = asyncio.create_task(supervise(server, stop))
        started = time.monotonic()
        bus = await login(config).connect(url, "antler-up")
        status(f"bus ready: streams, KV buckets and object store under prefix '{config.bus.prefix}'")
        components = {
            name: own_connection(url, config, name, entry)
            for name, entry in enabled_components(config).items()
        }
        runners = process_count(config.runner.processes)
        if runners > 1 and "runner" in components:
            components["runner"] = runner_pool(args, url, runners)
        print(f"NATS: {url}", flush=True)
        announcer = asyncio.create_task(announce_gateway(config)) if "gateway" in components else None
        if components:
            names = [
                f"runner (x{runners} processes)" if n == "runner" and runners > 1 else n for n in components
            ]
            status(f"components: {', '.join(names)}")
        else:
            status("components: none yet (only the bus runs)")
        status(f"Antler is up ({time.monotonic() - started:.2f}s). Press Ctrl-C to stop.")
        try:
            await serve(bus, config, components, stop, drain_timeout=DRAIN_TIMEOUT)
        except ComponentFailed as exc:
            raise CliError(str(exc)) from None
        finally:
            if announcer is not None:
                announcer.cancel()
            status("stopping ...")
            await bus.close()
            kill_children()
        if supervisor is not None and supervisor.done() and supervisor.exception() is not None:
            raise CliError(f"the embedded nats-server is gone: {supervisor.exception()}")
    finally:
        undo_signals()
        if server is not None:
            await server.stop()
        if supervisor is not None:
            await asyncio.gather(supervisor, return_exceptions=True)
    status("stopped")
    return 0
