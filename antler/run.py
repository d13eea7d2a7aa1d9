"""`antler run <component>`: one component against an existing NATS, until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse

from antler._common import CliError
from antler.components import UnknownComponent, resolve_component
from bus.launcher import run_component
from bus.runtime import run_main


async def run(args: argparse.Namespace) -> int:
    try:
        name, entry = resolve_component(args.component)
    except UnknownComponent as exc:
        raise CliError(str(exc), code=2) from None
    return await run_component(name, entry, args)


def main(args: argparse.Namespace) -> int:
    """`antler run`: the component in this process, or `--processes` of it forked."""
    if args.processes > 1:
        return run_forked(args)
    return run_main(run(args))


def run_forked(args: argparse.Namespace) -> int:
    """`antler run <component> --processes N` (no event loop here: each forked process runs its own)."""
    from antler.forkserver import serve_forked
    from antler.pool import forking_supported

    if not forking_supported():
        raise CliError("--processes needs Linux (a process forked after loading libraries)", code=2)
    try:
        return serve_forked(args)
    except UnknownComponent as exc:
        raise CliError(str(exc), code=2) from None
