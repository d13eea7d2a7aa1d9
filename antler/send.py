"""`antler send`: talk to the agent from a terminal, as a chat on channel `cli`.

With `--creds <file>` (or `--context <name>`), a `nats` context `antler creds --channel` wrote,
it connects as that channel's user from any directory: the URL, user, inbox and prefix come from
the file, the channel too unless `--channel` names one (which that user may then not publish on).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from antler._common import CliError, load, login, nats_url, setup_logging
from antler.send_steps import RunSteps
from bus import Bus, EnvelopeError, decode
from bus.chat_partitions import publish_inbound
from bus.errors import BusConnectError
from bus.messages import InboundMessage, OutboundMessage, RunEvent
from bus.tasks import wait_for

BUS_GONE_AFTER = 5.0  # seconds without the bus before giving up (`antler up` restarting it takes less)


class BusLost(Exception):
    """The connection to NATS was lost and did not come back."""


async def send(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    if not args.verbose:
        # Its own message says when the bus is gone; the connection's warnings would only repeat it.
        logging.getLogger("bus.connection").setLevel(logging.ERROR)
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
        terminal = Terminal()

        async def on_reply(msg: Msg) -> None:
            try:
                reply = decode(OutboundMessage, msg.data)
            except EnvelopeError:
                return
            if reply.chat_id == message.chat_id:
                terminal.arrived.put_nowait(reply)

        steps = RunSteps()

        async def on_event(msg: Msg) -> None:
            try:
                event = decode(RunEvent, msg.data)
            except EnvelopeError:
                return
            for line in steps.take(event):
                terminal.arrived.put_nowait(line)

        # Listen before publishing, so not even the first partial is missed.
        subs = [await bus.nc.subscribe(bus.subjects.chat_out(args.channel), cb=on_reply)]
        if client is None:  # a script channel's user may read its replies only, not runs' events
            subject = bus.subjects.chat_run_events(args.channel, message.chat_id)
            subs.append(await bus.nc.subscribe(subject, cb=on_event))
        ack = await publish_inbound(bus, args.channel, message)
        if args.no_wait:
            print(f"sent (stream seq {ack.seq})")
            return 0
        stop_watching = watch_connection(bus, terminal)
        try:
            return await terminal.show(args.timeout)
        except BusLost:
            terminal.end_line()
            raise CliError(
                f"lost the bus at {url} (was antler up stopped?); no answer came. The message is kept "
                "if the bus was: `antler send` again once Antler runs shows the conversation goes on",
                code=4,
            ) from None
        finally:
            stop_watching()
            for sub in subs:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
    finally:
        await bus.close()


def watch_connection(bus: Bus, terminal: Terminal) -> Callable[[], None]:
    """Tell `terminal` the bus is lost once it has been gone `BUS_GONE_AFTER` seconds; returns an undo."""
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def lost() -> None:
        nonlocal timer
        if timer is None:
            timer = loop.call_later(BUS_GONE_AFTER, terminal.arrived.put_nowait, LOST)

    def back(_outage: float) -> None:
        nonlocal timer
        if timer is not None:
            timer.cancel()
            timer = None

    undo = [bus.on_disconnected(lost), bus.on_reconnected(back)]

    def stop() -> None:
        for remove in undo:
            remove()
        if timer is not None:
            timer.cancel()

    return stop


LOST = object()


class Terminal:
    """The reply as it streams to stdout; the run's steps as short lines on stderr, so what a
    script reads from stdout is the answer alone."""

    def __init__(self) -> None:
        self.arrived: asyncio.Queue[OutboundMessage | str | object] = asyncio.Queue()
        self.shown = ""  # what stdout has of the answer
        self.line_open = False  # the screen's cursor is after some of the answer
        # Both on one screen: a step must not land in the middle of a line of the answer.
        self.one_screen = sys.stdout.isatty() and sys.stderr.isatty()

    async def show(self, timeout: float) -> int:
        """Print what arrives until the final reply; the exit code (1: the run failed).

        Raises:
            BusLost: the bus went away first.
            CliError: no final reply within `timeout` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self.end_line()
                raise CliError(
                    f"no final reply within {timeout:g}s; is the router running? (`antler up` starts it)",
                    code=3,
                )
            try:
                item = await wait_for(self.arrived.get(), remaining)
            except TimeoutError:
                continue
            if item is LOST:
                raise BusLost
            if isinstance(item, str):
                self.step(item)
                continue
            assert isinstance(item, OutboundMessage)
            if item.kind == "partial":
                # Partials carry the whole text so far: print only what is new.
                if item.text.startswith(self.shown):
                    self.write(item.text[len(self.shown) :])
                continue
            if item.kind == "error":
                self.end_line()
                print(item.text, file=sys.stderr)
                return 1
            if item.text.startswith(self.shown):
                self.write(item.text[len(self.shown) :])
            else:
                self.write(("\n" if self.shown else "") + item.text)
            print(flush=True)
            for file in item.files:
                kind = file.content_type or "unknown type"
                print(f"[file] {file.path or file.name} ({kind}, {file.size or '?'} bytes)")
            return 0

    def write(self, text: str) -> None:
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self.shown += text
        self.line_open = not text.endswith("\n")

    def step(self, line: str) -> None:
        if self.one_screen and self.line_open:
            line = "\n" + line  # on stderr: stdout stays the answer alone
        self.line_open = False
        print(line, file=sys.stderr, flush=True)

    def end_line(self) -> None:
        """Before an error message: the answer so far ends its line."""
        if self.shown and not self.shown.endswith("\n"):
            print(flush=True)


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
