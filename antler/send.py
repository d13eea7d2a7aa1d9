"""`antler send`: talk to the agent from a terminal, as a chat on channel `cli`.

With `--creds <file>` (or `--context <name>`), a `nats` context `antler creds --channel` wrote,
it connects as that channel's user from any directory: the URL, user, inbox and prefix come from
the file, the channel too unless `--channel` names one (which that user may then not publish on).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

from antler._common import CliError, load, login, nats_url, setup_logging
from bus import Bus, EnvelopeError, decode
from bus.errors import BusConnectError
from bus.messages import InboundMessage, OutboundMessage


async def send(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    text = " ".join(args.text) if args.text else sys.stdin.read()
    if not text.strip():
        raise CliError("nothing to send: give the message as arguments or on stdin", code=2)
    client = read_context(args)
    if client is not None:
        config.bus.prefix = client.get("antler", {}).get("prefix", config.bus.prefix)
        args.channel = args.channel or client.get("antler", {}).get("channel")
        url = args.nats_url or client.get("url") or nats_url(args, config)
        user = {"user": client.get("user"), "password": client.get("password")}
        try:
            bus = await Bus.connect(
                url,
                config.bus.model_copy(update=user),
                name="antler-send",
                inbox_prefix=client.get("inbox_prefix"),
            )
        except BusConnectError as exc:
            source = args.creds or args.context
            raise CliError(f"{exc} (as {user['user']!r}, from {source})", code=2) from None
    else:
        url = nats_url(args, config)
        bus = await login(config).connect(url, "antler-send", provision=False)
    args.channel = args.channel or "cli"
    try:
        message = InboundMessage(
            channel=args.channel,
            chat_id=args.chat or f"cli-{getpass.getuser()}",
            user_id=args.user or getpass.getuser(),
            text=text,
        )
        replies: asyncio.Queue[OutboundMessage] = asyncio.Queue()

        async def on_reply(msg: object) -> None:
            try:
                reply = decode(OutboundMessage, msg.data)  # type: ignore[attr-defined]
            except EnvelopeError:
                return
            if reply.chat_id == message.chat_id:
                replies.put_nowait(reply)

        # Listen before publishing, so not even the first partial is missed.
        sub = await bus.nc.subscribe(bus.subjects.chat_out(args.channel), cb=on_reply)
        ack = await bus.publish(
            bus.subjects.chat_in(args.channel, message.chat_id), message, msg_id=message.dedupe_id()
        )
        if args.no_wait:
            print(f"sent (stream seq {ack.seq})")
            return 0
        try:
            return await _print_replies(replies, args.timeout)
        finally:
            await sub.unsubscribe()
    finally:
        await bus.close()


async def _print_replies(replies: asyncio.Queue[OutboundMessage], timeout: float) -> int:
    shown = ""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            if shown:
                print()
            raise CliError(
                f"no final reply within {timeout:g}s; is the router running? (`antler up` starts it)", code=3
            )
        try:
            reply = await asyncio.wait_for(replies.get(), remaining)
        except TimeoutError:
            continue
        if reply.kind == "partial":
            # Partials carry the whole text so far: print only what is new.
            if reply.text.startswith(shown):
                sys.stdout.write(reply.text[len(shown) :])
                sys.stdout.flush()
                shown = reply.text
            continue
        if reply.kind == "error":
            if shown:
                print()
            print(reply.text, file=sys.stderr)
            return 1
        final = reply.text
        if final.startswith(shown):
            sys.stdout.write(final[len(shown) :])
        else:
            sys.stdout.write(("\n" if shown else "") + final)
        print(flush=True)
        for file in reply.files:
            kind = file.content_type or "unknown type"
            print(f"[file] {file.path or file.name} ({kind}, {file.size or '?'} bytes)")
        return 0


def read_context(args: argparse.Namespace) -> dict[str, Any] | None:
    """The nats context `--creds` or `--context` names (None: neither was given).

    Raises:
        CliError: it cannot be read, or is not a context.
    """
    if args.creds:
        path = Path(args.creds).expanduser()
    elif args.context:
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        path = config_home / "nats" / "context" / f"{args.context}.json"
    else:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the credentials {path}: {exc}", code=2) from None
    if not isinstance(data, dict) or not data.get("user"):
        raise CliError(
            f"{path} is not a nats context with a user (`antler creds --channel` writes one)", code=2
        )
    return data
