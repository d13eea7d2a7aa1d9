"""The HTTP client of OpenAI-compatible models: the openai SDK's aiohttp transport, shared per endpoint.

openai's default transport (httpx2 over httpcore and h11) parses a streamed answer in pure
Python, layer by layer; with aiohttp (the SDK's own `DefaultAioHttpClient`) the HTTP parsing
is done in C, and a turn of the runner takes about a sixth less CPU. As langchain-openai does
with its default client, one client is kept per endpoint, so compiled agents share
connections.

aiohttp sessions belong to the event loop that opened them: the transport keeps one per loop,
and `close_clients()` closes the running loop's: `bus.runtime.run_main` calls it as a
component process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

from bus.runtime import on_main_exit

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=64)
def shared_client(base_url: str | None) -> Any | None:
    """The aiohttp-backed `httpx2.AsyncClient` for this endpoint, or None without aiohttp (then the
    SDK's own client is used). Timeouts are the model's: the SDK sets them on each request."""
    try:
        from openai import DefaultAioHttpClient
        from openai._vendor.httpx_aiohttp.transport import AiohttpTransport
    except ImportError:  # no aiohttp: the SDK's httpx client
        return None

    class LoopSessions(AiohttpTransport):
        """aiohttp's transport with a session for each event loop (a session is bound to its loop)."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sessions: dict[asyncio.AbstractEventLoop, Any] = {}
            _transports.append(self)
            on_main_exit(close_clients)

        async def handle_async_request(self, request: Any) -> Any:
            loop = asyncio.get_running_loop()
            session = self.sessions.get(loop)
            if session is None or session.closed:
                for old in [old for old in self.sessions if old.is_closed()]:
                    self.sessions.pop(old).detach()  # its loop is gone: nothing left to close
                self.client = None
                session = self.sessions[loop] = self.get_client()
            self.client = session
            with _connection_errors_as_such():
                response = await super().handle_async_request(request)
            response.stream = _Remapped(response.stream)
            return response

        async def close_for(self, loop: asyncio.AbstractEventLoop) -> None:
            session = self.sessions.pop(loop, None)
            if session is not None:
                await session.close()

    class Client(DefaultAioHttpClient):
        def _init_transport(self, **kwargs: Any) -> Any:  # type: ignore[override]  # any httpx keywords
            transport = kwargs.pop("transport", None)
            return transport or LoopSessions(**_transport_kwargs(kwargs))

        def _init_proxy_transport(self, proxy: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # any keywords
            return LoopSessions(proxy=proxy, **_transport_kwargs(kwargs))

    return Client(base_url=base_url or "")


@functools.lru_cache(maxsize=64)
def shared_sync_client(base_url: str | None) -> Any:
    """The synchronous client langchain-openai builds with every model (Antler's agents call models
    asynchronously, so it carries only a sync `invoke`), with the shared TLS context: its own would
    load the CA certificates again for every endpoint (~20 ms of CPU each)."""
    from openai import DefaultHttpxClient

    return DefaultHttpxClient(base_url=base_url or "", verify=_default_tls(True))


_transports: list[Any] = []


@contextlib.contextmanager
def _connection_errors_as_such() -> Iterator[None]:
    """The vendored transport reports every aiohttp connection error as a connect *timeout*; a
    refused or dropped connection is a connection error (openai: "Connection error.")."""
    import aiohttp

    try:
        yield
    except httpx2.TimeoutException as exc:
        cause = exc.__cause__
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            raise httpx2.ConnectError(str(cause) or type(cause).__name__) from cause
        raise


class _Remapped(httpx2.AsyncByteStream):
    """A response body whose connection errors are reported as such (see above), read from aiohttp's
    buffer directly, and able to `hold` its next read.

    A model streaming its answer sends each token in a packet of its own. Read as they come, every
    packet goes up through the HTTP layers and the SSE parser alone (at 15 ms a token, four times
    a chunk window). After a chunk with text, the stream reader (`llm.streaming`) asks for a hold:
    the next read waits until the window has passed or the body has ended, then takes everything
    that arrived meanwhile at once. The end of the body ends the hold, so nothing waits for it.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        response = getattr(stream, "_aiohttp_response", None)
        self._content = getattr(response, "content", None)
        self._hold_until: float | None = None

    def hold(self, until: float) -> None:
        """Make the next read wait until loop time `until` (or the body's end), then take all that
        came meanwhile."""
        if self._content is not None:
            self._hold_until = until

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _connection_errors_as_such():
            if self._content is None:
                async for chunk in self._stream:
                    yield chunk
                return
            from openai._vendor.httpx_aiohttp.transport import map_aiohttp_exceptions

            content = self._content
            loop = asyncio.get_running_loop()
            with map_aiohttp_exceptions():
                while True:
                    until, self._hold_until = self._hold_until, None
                    if until is not None and not content.is_eof():
                        wait = until - loop.time()
                        if wait > 0:
                            # The body's end (or its error, raised by the read below) ends the hold.
                            with contextlib.suppress(Exception):
                                async with asyncio.timeout(wait):
                                    await content.wait_eof()
                    chunk = await content.readany()
                    if not chunk:
                        return
                    yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def _transport_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = ("verify", "cert", "trust_env", "http1", "http2", "limits")
    picked = {k: v for k, v in kwargs.items() if k in keep}
    if picked.get("verify", True) is True and picked.get("cert") is None:
        picked["verify"] = _default_tls(bool(picked.get("trust_env", True)))
    return picked


@functools.lru_cache(maxsize=2)
def _default_tls(trust_env: bool) -> Any:
    """The default TLS context (the system's CA certificates, or SSL_CERT_FILE's), built once: loading
    the certificates costs ~20 ms of CPU, and every endpoint's client would otherwise load its own."""
    return httpx2.create_ssl_context(verify=True, trust_env=trust_env)


async def close_clients() -> None:
    """Close the running loop's model connections (a component on its way out)."""
    loop = asyncio.get_running_loop()
    for transport in list(_transports):
        try:
            await transport.close_for(loop)
        except Exception as exc:  # closing is best effort: the process is ending
            log.debug("closing a model HTTP session failed: %s", exc)
