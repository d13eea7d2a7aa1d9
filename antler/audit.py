"""`antler audit`: the audit trail (stream `<PREFIX>_AUDIT`), newest last, with the filters of
`GET /api/v1/audit` (person, action, since, until, limit); `--follow` goes on printing records as
they are written, until Ctrl-C or `--count` of them."""

from __future__ import annotations

import argparse
import re

from access.audit import AuditLog, parse_when, record_line
from antler._common import CliError, load, login, nats_url, setup_logging


async def audit(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    if args.action and not re.fullmatch(r"[a-z_]{1,40}", args.action):
        raise CliError(
            f"--action: {args.action!r} is not an action (sign_in, run_started, tool_call, ...)", code=2
        )
    try:
        since = parse_when(args.since, "--since") if args.since else None
        until = parse_when(args.until, "--until") if args.until else None
    except ValueError as exc:
        raise CliError(str(exc), code=2) from None
    bus = await login(config).connect(nats_url(args, config), "antler-audit")
    try:
        log = AuditLog(bus)
        records = await log.read(
            user_id=args.user, action=args.action, since=since, until=until, limit=args.limit
        )
        for record in records:
            print(record.model_dump_json() if args.json else record_line(record), flush=True)
        if not args.follow:
            if not records:
                print("no audit records match", flush=True)
            return 0
        shown = 0
        start = records[-1].at if records else None
        async for record in log.follow(
            user_id=args.user, action=args.action, since=start, skip=frozenset(r.id for r in records)
        ):
            print(record.model_dump_json() if args.json else record_line(record), flush=True)
            shown += 1
            if args.count and shown >= args.count:
                break
        return 0
    finally:
        await bus.close()
