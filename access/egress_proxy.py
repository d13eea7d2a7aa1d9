"""A filtering HTTP/HTTPS forward proxy enforcing one egress policy (`access.egress`).

Sandboxed commands (on a Unix socket bound into their network namespace) reach the network only
through it. It takes `CONNECT host:port` (https, or any tunnel) and absolute `http://` requests:
the host must pass the policy (`access.egress.refusal`), it is resolved once and checked by the
SSRF guard (`access.addresses`: no loopback, private or metadata address unless pinned by the
operator), and the connection goes to the very address checked. In a tunnel the client's first
TLS record is read: a ClientHello naming another server (SNI) than the one CONNECT named is
refused, so a tunnel opened for an allowed name cannot ask a shared front for another. A plain
http request is parsed with h11: its Host header must be the URL's host (unless the policy lets
every host through, as the browser's does), and only that one request
(its body included) goes upstream, on a connection closed after the answer, so nothing smuggled
behind it reaches the server. Every refusal is answered with a 403 saying why, logged with the
run that tried it, and kept in `refusals` for the command's result.

With an `upstream` proxy (a web tool's own `proxy`, an operator's corporate one) the policy still
decides every host, but an allowed tunnel goes on through that proxy (`CONNECT host:port` there),
which resolves and connects; plain http is not carried that way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import h11

from access import egress
from access.addresses import AddressRefused, UnresolvableHost
from bus.messages import EgressPolicy
from bus.tasks import wait_for

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT = 15.0
HEAD_TIMEOUT = 30.0
MAX_LOGGED = 20  # refusals logged one by one per proxy (per command, for the sandbox)
MAX_HELLO = 64 * 1024  # a ClientHello with post-quantum key shares is a few KB; more is refused
_DROPPED = {b"proxy-connection", b"connection", b"keep-alive", b"proxy-authorization", b"upgrade", b"te"}


@dataclass(frozen=True)
class Refused:
    """A connection the policy refused: where to, and why."""

    host: str
    port: int | None
    reason: str

    def __str__(self) -> str:
        return f"{self.host}: {self.reason}"


class EgressProxy:
    """The proxy for one policy; `where` names it in the log (`sandbox`), `run_id` the run it serves."""

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        where: str,
        run_id: str | None = None,
        allow_private: bool = False,
        upstream: str | None = None,
    ) -> None:
        """`upstream`: an `http://[user:pass@]host:port` proxy allowed tunnels go through."""
        self.policy = policy
        self.upstream = urlsplit(upstream) if upstream else None
        if self.upstream is not None and (self.upstream.scheme != "http" or not self.upstream.hostname):
            raise ValueError(f"{upstream!r}: only an http:// proxy can carry the policy's tunnels")
        self.where = where
        self.run_id = run_id
        self.allow_private = allow_private
        self.refusals: list[Refused] = []  # the latest ones (50 at most), for the caller's message
        self.refused_total = 0  # all of them; past MAX_LOGGED the log gets one line, not one each
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Serve on 127.0.0.1; returns the port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD)
        return int(self._server.sockets[0].getsockname()[1])

    async def start_unix(self, path: str, mode: int = 0o666) -> None:
        """Serve on a Unix socket at `path` (made connectable by `mode`: the sandbox's uid is not ours)."""
        self._server = await asyncio.start_unix_server(self._serve, path, limit=MAX_HEAD)
        os.chmod(path, mode)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    def refused_since(self, mark: int) -> list[Refused]:
        return self.refusals[mark:]

    def _refuse(self, host: str, port: int | None, reason: str) -> Refused:
        refused = Refused(host, port, reason)
        self.refusals = [*self.refusals[-49:], refused]
        self.refused_total += 1
        if self.refused_total <= MAX_LOGGED:
            egress.log_refusal(self.where, self.run_id, host, port, reason)
        if self.refused_total == MAX_LOGGED:  # a command looping over refused hosts floods no log
            log.warning(
                "%s egress (run %s): %d connections refused; further ones are counted, not logged",
                self.where,
                self.run_id or "-",
                MAX_LOGGED,
            )
        return refused

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        try:
            await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except Exception:
            log.exception("%s egress proxy: a connection failed", self.where)
        finally:
            self._open.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        client = h11.Connection(h11.SERVER)
        client.receive_data(head)
        try:
            request = client.next_event()
            if not isinstance(request, h11.Request):
                raise ValueError("not a request")
            if request.method == b"CONNECT":
                host, port = _authority(request.target.decode("ascii"))
            else:
                url = urlsplit(request.target.decode("ascii"))
                if url.scheme != "http" or not url.hostname:
                    raise ValueError("not an absolute http:// URL")
                host, port = url.hostname, url.port or 80
        except (h11.ProtocolError, ValueError, UnicodeError) as exc:  # malformed: refused, never a crash
            await _answer(
                writer, 400, f"only CONNECT host:port and absolute http:// URLs are proxied ({exc})"
            )
            return
        found = await self._checked(writer, host, port)
        if found is None:
            return
        if self.upstream is not None and request.method != b"CONNECT":
            refused = self._refuse(host, port, "plain http is not carried through the upstream proxy")
            await _answer(writer, 403, f"refused by the {self.where}'s egress policy: {refused}")
            return
        if request.method == b"CONNECT":
            await self._tunnel(reader, writer, host, port, found)
            return
        host_header = dict(request.headers).get(b"host")
        named = urlsplit(f"//{host_header.decode('latin-1')}").hostname if host_header else host
        # Another site behind the allowed name's address, by its Host header: only `all` lets any.
        if self.policy.mode != "all" and (named or "").rstrip(".").lower() != host.rstrip(".").lower():
            refused = self._refuse(host, port, f"the Host header names {named!r}, not {host}")
            await _answer(writer, 403, f"refused by the {self.where}'s egress policy: {refused}")
            return
        upstream = await _open(found, port)
        if upstream is None:
            await _answer(writer, 502, f"cannot connect to {host}:{port}")
            return
        await _relay(upstream, writer, _forward_request(client, request, reader, upstream[1]))

    async def _checked(self, writer: asyncio.StreamWriter, host: str, port: int) -> list[str] | None:
        """`host`'s checked addresses, or None once the client was told why not."""
        reason = egress.refusal(self.policy, host)
        policy = "egress policy"
        found: list[str] = []
        try:
            if reason is None and self.upstream is None:  # else the upstream proxy resolves it
                found = await egress.addresses(self.policy, host, port, allow_private=self.allow_private)
        except AddressRefused as exc:
            reason = f"{exc.address} is {exc.reason}; only public addresses can be reached"
            policy = "address policy"
        except UnresolvableHost as exc:
            reason = f"the name does not resolve ({exc.detail})"
        if reason is None:
            return found
        refused = self._refuse(host, port, reason)
        await _answer(writer, 403, f"refused by the {self.where}'s {policy}: {refused}")
        return None

    async def _tunnel(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        found: list[str],
    ) -> None:
        """A CONNECT tunnel, opened upstream only once the client's first bytes passed the check."""
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        first = await _first_record(reader)
        if first is None:  # the client closed without a word
            return
        reason = self._tunnel_refusal(first, host)
        if reason is not None:
            self._refuse(host, port, reason)
            return  # the client's connection is closed: nothing went upstream
        upstream = await (_open(found, port) if self.upstream is None else self._through_upstream(host, port))
        if upstream is None:
            return
        upstream[1].write(first)
        await _relay(upstream, writer, _pipe(reader, upstream[1]))

    async def _through_upstream(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A tunnel to `host:port` through the upstream proxy, or None when it would not open one."""
        assert self.upstream is not None
        address = self.upstream.hostname or ""
        try:
            reader, writer = await wait_for(
                asyncio.open_connection(address, self.upstream.port or 80), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            return None
        head = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        if self.upstream.username is not None:
            secret = f"{unquote(self.upstream.username)}:{unquote(self.upstream.password or '')}"
            head += f"Proxy-Authorization: Basic {base64.b64encode(secret.encode()).decode()}\r\n"
        writer.write((head + "\r\n").encode())
        try:
            answer = await wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            answer = b""
        if answer.split(b" ", 2)[1:2] != [b"200"]:
            writer.close()
            return None
        return reader, writer

    def _tunnel_refusal(self, first: bytes, host: str) -> str | None:
        """Why a tunnel starting with `first` may not go on, or None.

        Under an allowlist a tunnel carries TLS naming (SNI) the server CONNECT named, so what it
        reaches is the allowed name, not another site behind the same address; with `all` (the
        browser's WebSockets) anything may, as long as a ClientHello does not name another server.
        """
        try:
            sni = server_name(first)
        except ValueError as exc:
            return f"an unreadable TLS ClientHello ({exc})"
        if sni is None:
            if self.policy.mode == "all":
                return None
            what = "names no server" if first[:1] == b"\x16" else "is not TLS"
            return f"a tunnel under an allowlist must carry TLS naming {host}; this one {what}"
        if sni.rstrip(".").lower() != host.rstrip(".").lower():
            return f"the tunnel to {host} asked TLS for another server ({sni})"
        return None


async def _open(found: list[str], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to the first of the checked addresses that answers."""
    for address in found:
        try:
            return await wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            continue
    return None


async def _relay(
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    writer: asyncio.StreamWriter,
    sending: Coroutine[Any, Any, None],
) -> None:
    """`sending` (the client's side, upstream) while the server's answer goes back to the client."""
    up_reader, up_writer = upstream
    task = asyncio.create_task(sending)
    try:
        await _pipe(up_reader, writer)  # the answer ends when the server closes its side
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        up_writer.close()


def _authority(target: str) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) of a CONNECT request."""
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{target!r} is not host:port")
    return host.strip("[]"), int(port)


async def _first_record(reader: asyncio.StreamReader) -> bytes | None:
    """The client's first bytes: a whole TLS ClientHello when it starts one, else what came first."""
    data = await reader.read(65536)
    if not data:
        return None
    if data[0] != 0x16:  # not a TLS handshake: nothing to check
        return data
    while (need := _hello_size(data)) is not None and len(data) < need:
        if len(data) > MAX_HELLO:
            raise ConnectionError("a TLS ClientHello larger than any real one")
        more = await reader.read(65536)
        if not more:
            break
        data += more
    return data


def _hello_size(data: bytes) -> int | None:
    """How many bytes the first TLS record holds with its header, once known."""
    return 5 + int.from_bytes(data[3:5], "big") if len(data) >= 5 else len(data) + 1


def server_name(data: bytes) -> str | None:
    """The server name (SNI) a TLS ClientHello asks for; None when `data` is not TLS or names none.

    Raises:
        ValueError: a TLS handshake record that is not a well-formed ClientHello.
    """
    if not data or data[0] != 0x16:
        return None
    if len(data) < 5:
        raise ValueError("a cut TLS record")
    body = data[5 : 5 + int.from_bytes(data[3:5], "big")]
    if len(body) < 4 or body[0] != 0x01:
        raise ValueError("the first handshake message is not a ClientHello")
    size = int.from_bytes(body[1:4], "big")
    if 4 + size > len(body):  # its extensions may follow in the next record: refused, not guessed
        raise ValueError("a ClientHello split over TLS records")
    hello = body[4 : 4 + size]
    at = 2 + 32  # version, random
    at += 1 + _byte(hello, at)  # session id
    at += 2 + _short(hello, at)  # cipher suites
    at += 1 + _byte(hello, at)  # compression methods
    if at == len(hello):
        return None  # no extensions at all
    end = at + 2 + _short(hello, at)
    at += 2
    if end > len(hello):
        raise ValueError("extensions run past the ClientHello (split over records)")
    while at + 4 <= end:
        kind, size = _short(hello, at), _short(hello, at + 2)
        at += 4
        if kind == 0:  # server_name: a list of (type, name); type 0 is a host name
            names = hello[at + 2 : at + size]
            while len(names) >= 3:
                length = int.from_bytes(names[1:3], "big")
                if names[0] == 0:
                    return names[3 : 3 + length].decode("ascii", errors="strict")
                names = names[3 + length :]
            return None
        at += size
    return None


def _byte(data: bytes, at: int) -> int:
    if at >= len(data):
        raise ValueError("a cut ClientHello")
    return data[at]


def _short(data: bytes, at: int) -> int:
    if at + 2 > len(data):
        raise ValueError("a cut ClientHello")
    return int.from_bytes(data[at : at + 2], "big")


async def _forward_request(
    client: h11.Connection,
    request: h11.Request,
    reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """The one request (head and body) upstream in origin form, on a connection closed after it."""
    parts = urlsplit(request.target.decode("ascii"))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [(k, v) for k, v in request.headers if k.lower() not in _DROPPED]
    if not any(k.lower() == b"host" for k, _ in headers):  # an HTTP/1.0 client's request
        headers.insert(0, (b"host", (parts.netloc.rpartition("@")[2]).encode("ascii")))
    upstream = h11.Connection(h11.CLIENT)
    up_writer.write(
        upstream.send(
            h11.Request(method=request.method, target=target, headers=[*headers, (b"connection", b"close")])
        )
        or b""
    )
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            client.receive_data(data)
            if not data:
                break
            continue
        if isinstance(event, h11.Data):
            up_writer.write(upstream.send(h11.Data(data=event.data)) or b"")
            await up_writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            up_writer.write(upstream.send(h11.EndOfMessage()) or b"")
            await up_writer.drain()
            return  # whatever the client sends after its request is not forwarded
        else:
            return


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
