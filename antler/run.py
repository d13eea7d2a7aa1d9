"""`antler run <component>`: one component against an existing NATS, until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio

from antler._common import CliError, load, nats_url, setup_logging, status
from antler.components import UnknownComponent, resolve_component
from bus import Bus, ComponentFailed, serve, stop_on_signals


async def run(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    try:
        name, entry = resolve_component(args.component)
    except UnknownComponent as exc:
        raise CliError(str(exc), code=2) from None
    url = nats_url(args, config)
    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        bus = await Bus.connect(url, config.bus, name=f"antler-{name}", provision=True)
        status(f"{name}: running against {url} (prefix '{config.bus.prefix}')")
        try:
            await serve(bus, config, {name: entry}, stop)
        except ComponentFailed as exc:
            raise CliError(str(exc)) from None
        finally:
            await bus.close()
    finally:
        undo()
    status(f"{name}: stopped")
    return 0
