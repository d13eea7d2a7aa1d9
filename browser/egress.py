"""Where Chromium may connect: every request it makes goes through this proxy, which refuses
loopback, private, link-local (cloud metadata) and other non-public addresses unless allowed.

Why a proxy and not Playwright's request routing: routing sees a redirect's first URL only and
Chromium resolves names itself, so a public page could redirect, or a name re-resolve (DNS
rebinding), to 169.254.169.254. Here the proxy resolves each host once, checks every address and
connects to the address it checked; redirects, subresources, WebSockets and `fetch()` from a page
are new connections through it. Chromium is started with `--proxy-server` pointing here and
`--proxy-bypass-list=<-loopback>`, so not even loopback goes around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

from access.addresses import AddressRefused, UnresolvableHost, resolve_public
from bus.tasks import wait_for

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT = 15.0


class Refused(Exception):
    """The address is not one the browser may open."""

    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: {reason}")


async def checked_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    """`host`'s addresses, resolved once, when the policy (`access.addresses`) allows every one.

    Raises:
        Refused: a non-public address (unless `allow_private`), or a name that does not resolve.
    """
    host = host.strip("[]")
    try:
        return await resolve_public(host, port, allow_private=allow_private)
    except UnresolvableHost as exc:
        raise Refused(host, f"the name does not resolve ({exc.detail})") from None
    except AddressRefused as exc:
        raise Refused(
            host,
            f"{exc.address} is {exc.reason}; the browser opens only public web pages, "
            "never non-public addresses",
        ) from None


class EgressProxy:
    """An HTTP proxy on 127.0.0.1 (CONNECT for https and WebSockets, absolute URLs for http)."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private
        self.refusals: list[Refused] = []  # the latest ones, for the tool's message
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    def refused_since(self, mark: int) -> list[Refused]:
        return self.refusals[mark:]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            await self._relay(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except Exception:
            log.exception("browser egress proxy: a connection failed")
        finally:
            self._open.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = request_line.decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                host, _, port_text = target.rpartition(":")
                port = int(port_text)
            else:
                url = urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise ValueError("not an absolute http:// URL")
                host, port = url.hostname, url.port or 80
        except ValueError:  # a malformed request line or port: refused, never a crash
            await _answer(writer, 400, "only CONNECT host:port and absolute http:// URLs are proxied")
            return
        try:
            addresses = await checked_addresses(host, port, self.allow_private)
        except Refused as exc:
            self.refusals = [*self.refusals[-50:], exc]
            log.info("browser egress refused %s:%s: %s", host, port, exc.reason)
            await _answer(writer, 403, f"refused by the browser's address policy: {exc}")
            return
        upstream = await _connect(addresses, port)
        if upstream is None:
            await _answer(writer, 502, f"cannot connect to {host}:{port}")
            return
        up_reader, up_writer = upstream
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            origin = url.path or "/"
            if url.query:
                origin += "?" + url.query
            headers = [
                line
                for line in rest.split(b"\r\n")
                if line
                and not line.lower().startswith((b"proxy-connection:", b"connection:", b"keep-alive:"))
            ]
            # One request per upstream connection: the next one may be for another host.
            up_writer.write(
                f"{method} {origin} {version}\r\n".encode("latin-1")
                + b"\r\n".join([*headers, b"Connection: close"])
                + b"\r\n\r\n"
            )
        sending = asyncio.create_task(_pipe(reader, up_writer))
        try:
            await _pipe(up_reader, writer)  # the answer ends when the server closes its side
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            up_writer.close()


async def _connect(
    addresses: list[str], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    for address in addresses:
        try:
            return await wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            continue
    return None


async def _pipe(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            target.write(data)
            await target.drain()
    finally:
        with contextlib.suppress(Exception):
            target.write_eof() if target.can_write_eof() else target.close()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = text.encode()
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
