"""The GitHub adapter's webhook server: `POST <path>` on `listen:port`, behind the operator's proxy.

Every copy of the adapter serves it; the port is bound with `SO_REUSEPORT`, so copies on one host
share it (the kernel spreads the connections) and one that dies leaves the others serving. uvicorn
serves the bound socket; the component runtime owns the process's signals (uvicorn's own handling
is off). A port that cannot be bound is `bus.Misconfigured`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bus import Misconfigured

log = logging.getLogger(__name__)


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the component runtime handles SIGTERM/SIGINT


def _bind(listen: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in listen else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((listen, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise Misconfigured(f"channels.github: cannot listen on {listen}:{port} ({exc.strerror})") from exc
    return sock


@contextlib.asynccontextmanager
async def webhook_server(
    path: str, listen: str, port: int, receive: Callable[[Request], Awaitable[Response]]
) -> AsyncIterator[asyncio.Task[None]]:
    """Serve `POST path` with `receive` while inside; yields the serving task (done if it fails)."""
    route = "/" + path.lstrip("/")
    sock = _bind(listen, port)
    server = _QuietServer(
        uvicorn.Config(
            Starlette(routes=[Route(route, receive, methods=["POST"])]),
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]), name="github-webhook")
    try:
        while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.02)
        log.info("github: webhook served on http://%s:%d%s", listen, port, route)
        yield task
    finally:
        server.should_exit = True
        with contextlib.suppress(SystemExit, Exception):
            await task
        sock.close()
