"""`antler up`: embedded nats-server plus every component until Ctrl-C.

Components run in this process, each on its own connection, except the sandbox broker
and (with `runner.processes` above 1) the runners: those run as supervised child
processes (`antler.pool`).

"Antler is up" is printed once every component is ready to serve (consumers taking
work, runner processes included, services answering, the gateway listening) or has
failed and is being retried (`bus.supervision`): one whose platform cannot be reached
holds up neither the announcement nor the others, and the lines before it say which
and why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from antler._common import CliError, load, login, nats_url, setup_logging, status
from antler.components import COMPONENTS, resolve_component
from antler.pool import kill_children, process_count, process_pool, runner_pool
from antler.up_toolbox import ToolboxBuild, toolbox_at_start, with_toolbox
from bus import (
    Bus,
    ComponentEntry,
    ComponentFailed,
    EmbeddedServer,
    ServerError,
    component_ready,
    serve,
    stop_on_signals,
)
from bus.clients import embedded_authorization
from bus.health import describe
from bus.messages import ComponentHealth
from bus.subjects import Subjects
from bus.tasks import wait_for
from config import AppConfig
from llm.usable import model_problem

log = logging.getLogger("antler.up")
# Longer than a runner child's stop grace (antler.pool.STOP_GRACE): every child is stopped before we exit.
DRAIN_TIMEOUT = 30.0
STILL_WAITING = 15.0  # seconds between "still getting ready" lines
PROBE_INTERVAL = 0.05
LOG_FILE = "antler.log"  # in bus.data_dir: the components' log (the console shows its warnings and errors)


def own_connection(url: str, config: AppConfig, name: str, entry: ComponentEntry) -> ComponentEntry:
    """Give a component its own NATS connection (as its own user), as it would have in its own process."""

    async def run(_bus: Bus, _config: Any) -> None:
        bus = await login(config, name).connect(url, f"antler-{name}", provision=False)
        try:
            await entry(bus, config)
        finally:
            await bus.close()

    return run


def enabled_components(
    config: AppConfig, children: Mapping[str, ComponentEntry] | None = None
) -> dict[str, ComponentEntry]:
    """The components `antler up` starts, by name, each with its entry.

    Those named in `children` run as processes of their own and get the entry given there (their
    pool): their own modules are not imported into this process (the runner's would load
    LangChain and the model provider, about 45 MB, into a process that runs no agent).
    """
    found: dict[str, ComponentEntry] = {}
    for spec in COMPONENTS.values():
        if not spec.enabled(config):
            continue
        if children and spec.name in children:
            found[spec.name] = children[spec.name]
        else:
            name, entry = resolve_component(spec.name)
            found[name] = entry
    return found


def log_file_of(config: AppConfig) -> str:
    return os.path.join(os.path.abspath(config.bus.data_dir), LOG_FILE)


def gateway_url_file(config: AppConfig) -> Path:
    return Path(config.bus.data_dir) / "gateway.url"


async def gateway_listening(config: AppConfig) -> None:
    """Until the gateway has written the URL it listens on (it removes the file when it stops)."""
    url_file = gateway_url_file(config)
    while True:  # a file to poll: nothing to wait on but it appearing
        if await asyncio.to_thread(url_file.is_file):
            return
        await asyncio.sleep(PROBE_INTERVAL)


async def service_answers(bus: Bus, name: str) -> None:
    """Until an instance of micro service `name` answers a `$SRV` ping."""
    subject = f"$SRV.PING.{bus.subjects.service_name(name)}"
    while True:
        try:
            await bus.nc.request(subject, b"", timeout=0.5)
            return
        except Exception:  # no responders yet, or a timeout: not up yet
            await asyncio.sleep(PROBE_INTERVAL)


def own_ready(url: str, config: AppConfig, name: str, entry: ComponentEntry) -> ComponentEntry:
    """A component run in this process: on its own connection, saying when it is ready."""
    return with_readiness(name, own_connection(url, config, name, entry), config)


def with_readiness(name: str, entry: ComponentEntry, config: AppConfig) -> ComponentEntry:
    """A component that does not say itself when it is ready (`bus.component_ready`) is probed."""
    spec = COMPONENTS.get(name)
    if spec is None or spec.ready == "consumers":
        return entry
    if spec.ready == "service":
        return ready_when(entry, lambda bus: service_answers(bus, name))
    return ready_when(entry, lambda bus: gateway_listening(config))


def ready_when(entry: ComponentEntry, probe: Callable[[Bus], Awaitable[None]]) -> ComponentEntry:
    """`entry`, saying it is ready once `probe` returns."""

    async def run(bus: Bus, config: Any) -> None:
        async def watch() -> None:
            await probe(bus)
            component_ready()

        watcher = asyncio.create_task(watch())
        try:
            await entry(bus, config)
        finally:
            watcher.cancel()

    return run


class Readiness:
    """Which components have settled: ready to serve, or failed and being retried."""

    def __init__(self, names: list[str]) -> None:
        self.waiting = list(names)
        self.health: dict[str, ComponentHealth] = {}
        self.all_ready = asyncio.Event()
        if not self.waiting:
            self.all_ready.set()

    def update(self, name: str, health: ComponentHealth) -> None:
        self.health[name] = health
        if health.status == "starting":
            return
        if name in self.waiting:
            if health.status != "unhealthy":  # (an unhealthy one: the runtime said why)
                log.info("%s is ready", name)
            self.waiting.remove(name)
        if not self.waiting:
            self.all_ready.set()

    def not_well(self) -> dict[str, ComponentHealth]:
        return {n: h for n, h in self.health.items() if h.status in ("unhealthy", "degraded")}


async def announce_when_ready(readiness: Readiness, config: AppConfig, started: float) -> None:
    """Print "Antler is up" (and the gateway's URL) once every component has settled, after a line
    for each that is not well; last, when the runner cannot answer (no usable model), what to do."""
    while True:
        try:
            await wait_for(readiness.all_ready.wait(), STILL_WAITING)
            break
        except TimeoutError:
            status(f"still getting ready: {', '.join(readiness.waiting)} ...")
    url_file = gateway_url_file(config)
    if await asyncio.to_thread(url_file.is_file):
        url = (await asyncio.to_thread(url_file.read_text, encoding="utf-8")).strip()
        print(f"Gateway: {url}  (API: {url}/api, docs: {url}/docs)", flush=True)
    not_well = readiness.not_well()
    runner = not_well.get("runner")
    if runner is not None and runner.status == "degraded":  # told last, below
        del not_well["runner"]
    else:
        runner = None
    for name, health in not_well.items():
        status(f"{name} is {health.status}: {describe(health)} (the rest serves; see /health)")
    status(f"Antler is up ({time.monotonic() - started:.2f}s). Press Ctrl-C to stop.")
    if runner is not None:
        # Last, where a newcomer looks: everything runs, but no message will be answered.
        problem = model_problem(config)
        advice = problem.advice if problem is not None else f"Antler cannot answer yet: {describe(runner)}"
        status(f"\n{advice}\n\n/health reports the runner degraded until then.")


async def say_when_stopping(stop: asyncio.Event) -> None:
    await stop.wait()
    status("stopping: work in progress finishes or goes back to the bus (Ctrl-C again: at once) ...")


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
    # Routine lines go to the file (the children are given it too); the console keeps to the few
    # lines below and to what needs someone's attention.
    args.log_file = log_file_of(config)
    setup_logging(config, args.verbose, args.log_file)
    if COMPONENTS["sandbox"].enabled(config):
        from antler.sandbox import announce_limits

        announce_limits(config)
    stop = asyncio.Event()
    undo_signals = stop_on_signals(stop)
    stopping = asyncio.create_task(say_when_stopping(stop))
    server: EmbeddedServer | None = None
    supervisor: asyncio.Task[None] | None = None
    # Built (when not current) while everything else starts: nobody waits minutes of pip for it.
    toolbox: ToolboxBuild | None = None
    if COMPONENTS["sandbox"].enabled(config):
        toolbox = toolbox_at_start(config, args)
    try:
        if config.bus.url or args.nats_url:
            url = nats_url(args, config)
            status(f"using NATS at {url}")
        else:
            emb = config.bus.embedded
            authorization = None
            if emb.component_users:
                subjects, data_dir = Subjects(config.bus.prefix), Path(config.bus.data_dir)
                # Made again at each (re)start of the server: clients minted meanwhile stay users.
                authorization = partial(embedded_authorization, subjects, data_dir)
                authorization()  # the users file, before any component reads it
            server = EmbeddedServer(
                config.bus.data_dir,
                host=emb.host,
                port=emb.port,
                max_payload_mb=emb.max_payload_mb,
                authorization=authorization,
                sync_interval=emb.sync_interval,
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
        # A URL file left by a gateway that died would say "listening" before this one is.
        await asyncio.to_thread(gateway_url_file(config).unlink, missing_ok=True)
        runners = process_count(config.runner.processes)
        # What users send the sandbox (commands, patterns) must never hold up the gateway or the router.
        children = {"sandbox": process_pool("sandbox", args, url)}
        if toolbox is not None:
            children["sandbox"] = with_toolbox(children["sandbox"], toolbox)
        if COMPONENTS["browser"].enabled(config):  # Chromium and its pages: never in this process
            children["browser"] = process_pool("browser", args, url)
        if runners > 1:
            children["runner"] = runner_pool(args, url, runners, config.runner.fork_processes)
        routers = config.channels.router_processes
        if routers > 1:
            children["router"] = process_pool("router", args, url, routers)
        components = {
            name: entry if name in children else own_ready(url, config, name, entry)
            for name, entry in enabled_components(config, children).items()
        }
        print(f"NATS: {url}", flush=True)
        if components:
            names = [
                f"runner (x{runners} processes)" if n == "runner" and runners > 1 else n for n in components
            ]
            status(f"components: {', '.join(names)}; getting ready ...")
        else:
            status("components: none yet (only the bus runs)")
        shown = "all of it shown here too" if args.verbose else "warnings and errors shown here too; -v: all"
        status(f"log: {args.log_file} ({shown})")
        readiness = Readiness(list(components))
        announcer = asyncio.create_task(announce_when_ready(readiness, config, started))
        try:
            here = [name for name in components if name not in children]
            await serve(
                bus,
                config,
                components,
                stop,
                drain_timeout=DRAIN_TIMEOUT,
                on_health=readiness.update,
                in_process=here,
            )
        except ComponentFailed as exc:
            raise CliError(str(exc)) from None
        finally:
            announcer.cancel()
            await bus.close()
            kill_children()
        if supervisor is not None and supervisor.done() and supervisor.exception() is not None:
            raise CliError(f"the embedded nats-server is gone: {supervisor.exception()}")
    finally:
        undo_signals()
        stopping.cancel()
        if toolbox is not None:
            await toolbox.stop()
        if server is not None:
            await server.stop()
        if supervisor is not None:
            await asyncio.gather(supervisor, return_exceptions=True)
    status("stopped")
    return 0
