"""Connecting only to addresses that were checked: the defence against DNS rebinding.

Checking a name's addresses and then letting the HTTP client resolve the name again to connect
leaves a gap: a hostile DNS server answers the check with a public address and the connection with
127.0.0.1 (or the cloud metadata address). Here the name is resolved once, per connection, inside
the HTTP client's network backend; every address is checked, and the socket is opened to one of
those very addresses. TLS still verifies the certificate for, and sends SNI of, the URL's host name
(httpcore passes the origin's host to `start_tls`, not the address), and the Host header is the URL's.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

# Resolves (host, port) to the addresses a connection may use, refusing with an exception.
CheckedResolver = Callable[[str, int], Awaitable[list[str]]]


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting to the addresses `resolve` returned and checked."""

    def __init__(self, resolve: CheckedResolver) -> None:
        self._resolve = resolve
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await self._resolve(host, port):
            try:  # an IP literal: anyio connects to it without resolving anything
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(f"{host} has no address")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("only TCP connections to checked addresses are made")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its request/response and error mapping) over a `CheckedBackend`.

    httpx takes no network backend as an argument, so its connection pool is replaced by an equal
    one made with ours (`_pool` is the attribute httpx's transport sends through).
    """

    def __init__(self, ssl_context: ssl.SSLContext, resolve: CheckedResolver) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, network_backend=CheckedBackend(resolve)
        )
