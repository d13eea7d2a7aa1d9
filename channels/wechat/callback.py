"""The callback server of the WeChat and WeCom adapters: the URL the platform posts messages to.

Both platforms check the URL with a GET (answered with the `echostr` it carries, once its signature
holds) and post each message as XML to it; uvicorn serves both on `listen:port` at `path` (behind
the operator's HTTPS proxy), as the Telegram adapter serves its webhook. The runtime owns the
process's signals, so uvicorn's own handling is off. A port already taken is `bus.Misconfigured`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bus import Misconfigured

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


class _Server(uvicorn.Server):
    """uvicorn without its signal handling: the component runtime owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_callback(
    name: str, *, path: str, listen: str, port: int, verify: Handler, receive: Handler
) -> None:
    """Serve `GET path` with `verify` and `POST path` with `receive` until cancelled."""
    route = "/" + path.lstrip("/")
    server = _Server(
        uvicorn.Config(
            Starlette(
                routes=[Route(route, verify, methods=["GET"]), Route(route, receive, methods=["POST"])]
            ),
            host=listen,
            port=port,
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
    )
    task = asyncio.create_task(server.serve(), name=f"{name}-callback")
    try:
        while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.02)
        if task.done():
            try:
                task.result()
            except SystemExit:  # uvicorn exits when it cannot bind
                pass
            raise Misconfigured(f"channels.{name}: cannot listen on {listen}:{port} (is the port taken?)")
        log.info("%s: callback URL served on http://%s:%d%s", name, listen, port, route)
        await asyncio.shield(task)
    finally:
        server.should_exit = True
        with contextlib.suppress(SystemExit, Exception):
            await task
