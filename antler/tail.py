"""`antler tail`: watch bus traffic, one readable line per message."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from datetime import datetime
from typing import Any

from antler._common import load, login, nats_url, setup_logging, status
from bus import stop_on_signals

# Shown first, as `key=value`, so what a message is stays in view even when the line is cut.
SUMMARY_KEYS = ("event", "seq", "kind", "status", "action", "channel", "chat_id")


def render(subject: str, data: bytes, headers: dict[str, str] | None, *, full: bool, width: int) -> str:
    """One line: time, subject, the message's gist (`event=messages seq=3`), its body, then its ids."""
    stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    summary = ""
    try:
        payload: Any = json.loads(data) if data else None
        if isinstance(payload, dict) and not full:
            shown = [
                k for k in SUMMARY_KEYS if isinstance(payload.get(k), (str, int)) and payload.get(k) != ""
            ]
            summary = " ".join(f"{k}={payload[k]}" for k in shown)
            payload = {k: v for k, v in payload.items() if k not in shown and k != "v"}
        body = json.dumps(payload, ensure_ascii=False, indent=2 if full else None)
    except ValueError:
        body = data.decode("utf-8", errors="replace")
    extra = ""
    if headers:
        shown_headers = {k: v for k, v in headers.items() if k.startswith(("Nats-Msg-Id", "Antler-"))}
        if shown_headers:
            extra = "  " + " ".join(f"{k}={v}" for k, v in shown_headers.items())
    line = f"{stamp} {subject}  {summary + '  ' if summary else ''}{body}{extra}"
    if not full and len(line) > width:
        line = line[: max(width - 1, 20)] + "…"
    return line


async def tail(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    url = nats_url(args, config)
    bus = await login(config).connect(url, "antler-tail", provision=False)
    pattern = bus.subjects.full(args.pattern or ">")
    width = shutil.get_terminal_size((160, 20)).columns
    count = 0

    async def on_msg(msg: Any) -> None:
        nonlocal count
        count += 1
        print(render(msg.subject, msg.data, msg.headers, full=args.full, width=width), flush=True)
        if args.count and count >= args.count:
            stop.set()

    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        sub = await bus.nc.subscribe(pattern, cb=on_msg)
        await bus.nc.flush()  # the server has the subscription before we say we are listening
        status(f"tailing {pattern} on {url} (Ctrl-C to stop)")
        await stop.wait()
        await sub.unsubscribe()
    finally:
        undo()
        await bus.close()
    sys.stdout.flush()
    return 0
