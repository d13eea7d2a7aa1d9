"""Telegram updates python-telegram-bot cannot read: confirmed, dead-lettered, logged once.

python-telegram-bot parses a whole `getUpdates` answer at once; one update it
cannot parse (a field of a shape it does not know) fails the call, the offset
never moves past it, and the same answer is fetched again at once, forever.
So the adapter's `getUpdates` requests go through `ScreenedUpdates`, which
tries each update on its own before the library sees them: one it cannot
parse is handed to `on_unreadable` (the adapter dead-letters it with the raw
payload and the reason) and replaced by an empty update with the same id, so
the library's next offset confirms it to Telegram and nothing is fetched twice.

In webhook mode the same holds: python-telegram-bot's own webhook server
answers such an update 400, and Telegram sends it again and again, so the
adapter serves the webhook itself (`serve_webhook`): an unreadable update is
answered 200 and handed to `on_unreadable`; the others go to the
application's update queue, as the library's server would put them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any
from urllib.parse import urlparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from telegram import Update
from telegram.error import TelegramError
from telegram.ext import Application
from telegram.request import HTTPXRequest

from bus import Bus, component_healthy, component_unhealthy
from bus.dlq import dead_letter

log = logging.getLogger("channels.telegram")

OnUnreadable = Callable[[Any, str], Awaitable[None]]


class ScreenedUpdates(HTTPXRequest):
    """The request object for `getUpdates` only (`ApplicationBuilder.get_updates_request`). Each
    poll also tells the adapter's health (`bus.health`): python-telegram-bot rides out an outage
    by polling again, so a failed poll is where the adapter learns Telegram is out of reach (`where`
    names it), and the next good one that it is back."""

    def __init__(
        self, on_unreadable: OnUnreadable, *, where: str = "api.telegram.org", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._on_unreadable = on_unreadable
        self._where = where

    async def do_request(self, url: str, method: str, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        polling = url.rstrip("/").endswith("/getUpdates")
        try:
            code, payload = await super().do_request(url, method, *args, **kwargs)
        except TelegramError as exc:  # NetworkError, TimedOut: the library polls again
            if polling:
                component_unhealthy(f"cannot reach {self._where}: {exc}; polling again")
            raise
        if not polling:
            return code, payload
        if code == 200:
            component_healthy()
        elif code >= 500 or code == 409:  # Telegram's trouble, or another process polling this bot
            component_unhealthy(f"{self._where} answers getUpdates with HTTP {code}; polling again")
        if code != 200:
            return code, payload
        try:
            body = json.loads(payload)
        except ValueError:
            return code, payload  # the library says what is wrong with it
        updates = body.get("result") if isinstance(body, dict) else None
        if not isinstance(updates, list):
            return code, payload
        kept: list[Any] = []
        changed = False
        for raw in updates:
            reason = _unreadable(raw)
            if reason is None:
                kept.append(raw)
                continue
            changed = True
            await self._on_unreadable(raw, reason)
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if isinstance(update_id, int):
                kept.append({"update_id": update_id})  # nothing to handle; the next offset confirms it
        if not changed:
            return code, payload
        return code, json.dumps({**body, "result": kept}).encode()


def _unreadable(raw: Any) -> str | None:
    """Why python-telegram-bot cannot read this update (None: it can)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("update_id"), int):
        return "not an update object with an integer update_id"
    try:
        Update.de_json(raw, None)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class _Server(uvicorn.Server):
    """uvicorn without its signal handling: the component runtime owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_webhook(
    app: Application[Any, Any, Any, Any, Any, Any],
    handle: Callable[[Update], Awaitable[None]],
    *,
    url: str,
    listen: str,
    port: int,
    secret: str,
    allowed_updates: Sequence[str],
    on_unreadable: OnUnreadable,
) -> None:
    """Register `url` with Telegram and take its updates on `listen:port` until cancelled: only
    requests carrying `secret`; each update to `handle`, an unreadable one to `on_unreadable` (both
    answered 200 once done, so Telegram never sends them again); an update `handle` fails on (the
    bus could not store it) is answered 503, and Telegram sends it again later."""

    async def receive(request: Request) -> Response:
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            return Response(status_code=403)
        body = await request.body()
        try:
            raw: Any = json.loads(body)
        except ValueError as exc:
            await on_unreadable(body.decode(errors="replace"), f"not JSON ({exc})")
            return Response(status_code=200)
        reason = _unreadable(raw)
        if reason is not None:
            await on_unreadable(raw, reason)
        else:
            try:
                await handle(Update.de_json(raw, app.bot))
            except Exception:
                log.exception(
                    "telegram: webhook update %s not stored; Telegram sends it again", raw["update_id"]
                )
                return Response(status_code=503)
        return Response(status_code=200)

    path = "/" + urlparse(url).path.lstrip("/")
    server = _Server(
        uvicorn.Config(
            Starlette(routes=[Route(path, receive, methods=["POST"])]),
            host=listen,
            port=port,
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        await app.bot.set_webhook(url=url, secret_token=secret, allowed_updates=list(allowed_updates))
        await asyncio.shield(task)
    finally:
        server.should_exit = True
        await task


def dead_letterer(bus: Bus) -> OnUnreadable:
    """`on_unreadable` for the adapter: each such update dead-lettered with its raw payload and the
    reason, and logged once (the library never sees it again: it is confirmed)."""

    async def on_unreadable(raw: Any, reason: str) -> None:
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        try:  # (`dead_letter` logs it: one line per unreadable update)
            await dead_letter(
                bus,
                stream="telegram",
                stream_seq=update_id if isinstance(update_id, int) else 0,
                subject=bus.subjects.chat_in_channel("telegram"),
                data=json.dumps(raw).encode(),
                headers=None,
                consumer="telegram-updates",
                reason=f"unreadable Telegram update: {reason}",
                deliveries=1,
            )
        except Exception:
            log.exception("telegram: could not dead-letter update %s", update_id)

    return on_unreadable
