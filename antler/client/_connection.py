"""Finding and logging in to a running Antler, as `antler send` does, with the gateway's rights.

The URL by precedence: given, `$ANTLER_NATS_URL`, `bus.url` in config.yaml, the `nats.url` a running
`antler up` wrote into its data dir. The login: given (user and password, or a `nats` context file
`antler creds` wrote), else as `bus.launcher.login` finds it for the gateway (the environment, the
config, the users `antler up` saved in its data dir). A refusal the server sends for a subject the
user may not touch is heard as it arrives (`Denials`), so a call fails at once with `NotAllowed`
naming the subject, not after its timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from nats.aio.client import Client as NATS

from antler.client.errors import AntlerNotRunning, InvalidRequest, NotAllowed
from bus import Bus
from bus.errors import BusConnectError
from bus.launcher import LaunchError, login, nats_url
from config import AppConfig, ConfigError, load_config

T = TypeVar("T")
COMPONENT = "gateway"  # whose NATS user and rights the client takes: it does what the gateway does
START_HINT = "start it with `antler up` (in the directory of its config.yaml), or use Client.embedded()"
_DENIED_SUBJECT = re.compile(r'to "([^"]+)"')


def load(config: str | os.PathLike[str] | AppConfig | None) -> AppConfig:
    """The config: an AppConfig as given, else config.yaml (given, `$ANTLER_CONFIG_PATH`, ./config.yaml)."""
    if isinstance(config, AppConfig):
        return config
    if config is not None and not isinstance(config, str | os.PathLike):
        raise InvalidRequest(f"config: a path to config.yaml or an AppConfig, not {type(config).__name__}")
    if config is not None and not Path(config).is_file():
        raise InvalidRequest(f"config: no file at {config}")
    try:
        return load_config(config)
    except ConfigError as exc:
        raise InvalidRequest(f"config: {exc}") from None


@dataclass(frozen=True)
class Login:
    """Where and as whom to connect."""

    url: str
    user: str | None
    password: str | None
    inbox_prefix: str | None
    source: str


def read_creds(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A `nats` context file (`antler creds --channel/--agent-owner` writes them)."""
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"creds: cannot read {file}: {exc}") from None
    if not isinstance(data, dict) or not data.get("user"):
        raise InvalidRequest(f"creds: {file} is not a nats context with a user (`antler creds` writes one)")
    return data


def find_login(
    config: AppConfig,
    *,
    url: str | None = None,
    user: str | None = None,
    password: str | None = None,
    creds: str | os.PathLike[str] | None = None,
) -> Login:
    """Where Antler is and how to log in; the config's prefix follows a context file's."""
    if creds is not None:
        context = read_creds(creds)
        config.bus.prefix = context.get("antler", {}).get("prefix", config.bus.prefix)
        url = url or context.get("url")
        user, password = context["user"], context.get("password")
        inbox, source = context.get("inbox_prefix"), f"from {creds}"
    elif user is not None:
        inbox, source = None, "given"
    else:
        found = login(config, COMPONENT)
        user, password = found.bus.user, found.bus.password
        inbox, source = found.inbox_prefix, found.source
    try:
        where = url or nats_url(argparse.Namespace(nats_url=None), config)
    except LaunchError:
        raise AntlerNotRunning(
            f"Antler is not running here (no {Path(config.bus.data_dir) / 'nats.url'}, no "
            f"$ANTLER_NATS_URL, no bus.url in config.yaml): {START_HINT}; or pass nats_url="
        ) from None
    return Login(where, user, password, inbox, source)


async def connect(config: AppConfig, found: Login, name: str) -> Bus:
    settings = config.bus.model_copy(update={"user": found.user, "password": found.password})
    try:
        return await Bus.connect(found.url, settings, name=name, inbox_prefix=found.inbox_prefix)
    except BusConnectError as exc:
        if "authorization" in str(exc).lower():
            raise AntlerNotRunning(
                f"NATS at {found.url} refused the login (user {found.user!r}, {found.source}): give the "
                "config.yaml of that `antler up` (its data dir holds the users it made), or user=/password=, "
                "or creds= (a file `antler creds` wrote)",
                found.url,
            ) from None
        raise AntlerNotRunning(
            f"Antler is not running at {found.url} ({exc}): {START_HINT}", found.url
        ) from None


ErrorListener = Callable[[Exception], Awaitable[None]]


def listen_for_server_errors(nc: NATS, listener: ErrorListener) -> None:
    """Have `listener` hear every asynchronous error the server sends this connection (a
    "Permissions Violation" for a refused subject among them), before the callback the connection
    already had (the bus's own, which logs it).

    nats-py (2.x) has no public way to add an error listener to an open connection: the
    `error_cb` given to `connect()` is kept in the private attribute `Client._error_cb`, which this
    replaces with a wrapper. If a nats-py release renames it, this raises at once (and
    tests/client/test_connection.py fails) rather than the client waiting out every timeout.
    """
    previous = getattr(nc, "_error_cb", None)
    if previous is None or not callable(previous):
        raise RuntimeError(
            "nats-py no longer keeps its error callback in Client._error_cb: "
            "antler.client._connection.listen_for_server_errors must follow it"
        )

    async def both(exc: Exception) -> None:
        try:
            await listener(exc)
        finally:
            await previous(exc)

    nc._error_cb = both


class Denials:
    """Permission refusals the server sends this connection, as they come: a call waiting for an
    answer that will never come (its request was refused) is failed at once."""

    def __init__(self, bus: Bus) -> None:
        self.user = bus.config.user
        self._waiters: set[asyncio.Future[str]] = set()
        listen_for_server_errors(bus.nc, self._heard)

    async def _heard(self, exc: Exception) -> None:
        text = str(exc)
        if "permissions violation" in text.lower():
            for waiter in list(self._waiters):
                if not waiter.done():
                    waiter.set_result(text)

    async def guard(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """`await call()`, or `NotAllowed` as soon as the server refuses this user something meanwhile."""
        loop = asyncio.get_running_loop()
        denied: asyncio.Future[str] = loop.create_future()
        self._waiters.add(denied)
        task = asyncio.ensure_future(call())
        try:
            either: list[asyncio.Future[Any]] = [task, denied]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            task.cancel()
            text = denied.result()
            match = _DENIED_SUBJECT.search(text)
            subject = match.group(1) if match else None
            raise NotAllowed(
                f"{what}: NATS user {self.user!r} has no right to {subject or 'do this'} "
                f"({text.removeprefix('nats: ')}); connect with the gateway's or the admin's credentials "
                "(the config.yaml of that `antler up`), not a script channel's",
                subject,
            )
        finally:
            self._waiters.discard(denied)
            if not task.done():
                task.cancel()
