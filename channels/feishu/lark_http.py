"""lark-oapi's API calls on one kept HTTP client per event loop.

lark-oapi's async transport (`lark_oapi.core.http.transport.Transport.aexecute`) opens a new
`httpx.AsyncClient` for every call and closes it afterwards: each card update of a streamed
answer built a TLS context (the CA certificates loaded again, ~25 ms of CPU) and opened a new
connection with its own handshake. `install()` gives that module an `httpx` whose
`AsyncClient()` hands out the running loop's kept client, which the transport's `async with`
leaves open; everything else in it is httpx's own. `close()` closes the running loop's client
(the adapter, as it stops). A client is bound to the loop that opened it: one per loop, and one
whose loop has closed is dropped.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any

import httpx

_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


class _Kept:
    """`async with` over a kept client: it stays open afterwards."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def __aenter__(self) -> httpx.AsyncClient:
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        return None


def kept_client(*args: Any, **kwargs: Any) -> Any:
    """What lark's transport gets for `httpx.AsyncClient()`: the running loop's kept client (it
    calls it without arguments; a call with some gets a client of its own, as before)."""
    if args or kwargs:
        return httpx.AsyncClient(*args, **kwargs)
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        for gone in [other for other in _clients if other.is_closed()]:
            del _clients[gone]
        client = _clients[loop] = httpx.AsyncClient()
    return _Kept(client)


def install() -> None:
    """Route lark-oapi's async API calls through the kept clients (once per process)."""
    from lark_oapi.core.http import transport

    if getattr(transport.httpx, "antler_kept", False):
        return
    names = [name for name in dir(httpx) if not name.startswith("__")]
    shim = types.SimpleNamespace(**{name: getattr(httpx, name) for name in names})
    shim.AsyncClient = kept_client
    shim.antler_kept = True
    transport.httpx = shim


async def close() -> None:
    """Close the running loop's kept client, if it has one."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
