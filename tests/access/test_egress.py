"""The egress policy (`access.egress`) and its proxy (`access.egress_proxy`) on their own: which
policy a role gets, and what the proxy lets through a tunnel or a plain request.

Names are pinned to the loopback server with `egress.hosts` (no DNS in tests); an unpinned name
goes through the SSRF guard as in production.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic import ValidationError

from access.egress import egress_policy
from access.egress_proxy import EgressProxy, server_name
from bus.messages import EgressPolicy
from config import AppConfig
from config.loader import _build


def app(data: dict[str, Any]) -> AppConfig:
    return _build(AppConfig, data, "test config")


def test_a_role_s_own_egress_replaces_the_deployment_s() -> None:
    config = app(
        {
            "egress": {"mode": "allowlist", "allow": ["PyPI.org.", "*.pythonhosted.org"]},
            "access": {"roles": {"member": {}, "guest": {"egress": {"mode": "none"}}}},
        }
    )
    member = egress_policy(config, "member")
    assert (member.mode, member.allow, member.source) == (
        "allowlist",
        ["pypi.org", "pythonhosted.org"],
        "egress",
    )
    guest = egress_policy(config, "guest")
    assert (guest.mode, guest.source) == ("none", "access.roles.guest.egress")
    assert egress_policy(config, "no-such-role").mode == "allowlist"  # the default role's


def test_unset_egress_keeps_the_sandbox_switch_and_leaves_web_fetch_alone() -> None:
    closed = egress_policy(app({}), None)
    assert (closed.mode, closed.binds_web) == ("none", False)
    assert egress_policy(app({"sandbox": {"allow_network": True}}), None).mode == "all"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        pytest.param({"allow": ["https://pypi.org/simple"]}, "allow", id="url"),
        pytest.param({"allow": ["pypi.org:443"]}, "allow", id="port"),
        pytest.param({"mode": "some"}, "mode", id="mode"),
        pytest.param({"hosts": {"mirror.internal": "not-an-address"}}, "hosts", id="pinned-address"),
    ],
)
def test_a_bad_egress_section_is_refused_naming_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises((ValidationError, ValueError), match=field):
        app({"egress": section})


class Upstream:
    """A loopback server recording every byte it receives."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0
        self.port = 0
        self.head_seen = asyncio.Event()

    async def start(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.received += await reader.readuntil(b"\r\n\r\n")
        self.head_seen.set()
        body = b"ok"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + body)
        await writer.drain()
        self.received += await reader.read(65536)  # what else came before the proxy closed its side
        writer.close()


@pytest_asyncio.fixture
async def upstream() -> AsyncIterator[Upstream]:
    found = Upstream()
    server = await found.start()
    yield found
    server.close()


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[tuple[EgressProxy, int]]:
    policy = EgressPolicy(
        mode="allowlist",
        allow=["allowed.test"],
        hosts={"allowed.test": "127.0.0.1", "evil.test": "127.0.0.1"},
    )
    served = EgressProxy(policy, where="test", run_id="run-7")
    port = await served.start()
    yield served, port
    await served.stop()


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def client_hello(name: str) -> bytes:
    """A real TLS ClientHello asking for `name`, as Python's ssl module writes it."""
    context = ssl.create_default_context()
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_server_name_of_a_client_hello_is_read() -> None:
    assert server_name(client_hello("files.allowed.test")) == "files.allowed.test"
    assert server_name(b"GET / HTTP/1.1\r\n") is None
    with pytest.raises(ValueError, match="ClientHello"):
        server_name(b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00")


async def test_a_tunnel_asking_tls_for_another_server_is_cut(
    proxy: tuple[EgressProxy, int], upstream: Upstream
) -> None:
    served, port = proxy
    connect = f"CONNECT allowed.test:{upstream.port} HTTP/1.1\r\nHost: allowed.test\r\n\r\n".encode()
    answer = await exchange(port, connect + client_hello("evil.test"))
    assert answer.startswith(b"HTTP/1.1 200")  # the tunnel opened for the allowed name ...
    assert b"evil.test" not in upstream.received  # ... but the hello for another never went through
    assert "asked TLS for another server (evil.test)" in served.refusals[-1].reason
    assert upstream.connections == 0, "no connection was opened for a refused tunnel"


def split_over_records(hello: bytes, at: int) -> bytes:
    """The same ClientHello cut into two TLS records after `at` bytes of its handshake message."""
    message = hello[5:]
    first, rest = message[:at], message[at:]
    header = hello[:3]
    return header + len(first).to_bytes(2, "big") + first + header + len(rest).to_bytes(2, "big") + rest


@pytest.mark.parametrize(
    "first_bytes",
    [
        pytest.param(b"GET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n", id="plain-http-inside"),
        pytest.param(split_over_records(client_hello("evil.test"), 60), id="hello-split-over-records"),
        pytest.param(b"\x16\x03\x01\x00\x02\x01\x00", id="cut-hello"),
    ],
)
async def test_a_tunnel_under_an_allowlist_carries_only_tls_naming_its_server(
    proxy: tuple[EgressProxy, int], upstream: Upstream, first_bytes: bytes
) -> None:
    served, port = proxy
    connect = f"CONNECT allowed.test:{upstream.port} HTTP/1.1\r\nHost: allowed.test\r\n\r\n".encode()
    answer = await exchange(port, connect + first_bytes)
    assert answer == b"HTTP/1.1 200 Connection established\r\n\r\n"  # then closed, nothing relayed
    assert upstream.connections == 0
    assert served.refusals, "the refusal is kept for the command's result"


async def test_a_tunnel_with_the_right_server_name_is_relayed(
    proxy: tuple[EgressProxy, int], upstream: Upstream
) -> None:
    connect = f"CONNECT allowed.test:{upstream.port} HTTP/1.1\r\nHost: allowed.test\r\n\r\n".encode()
    hello = client_hello("allowed.test")
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy[1])
    writer.write(connect + hello + b"\r\n\r\n")
    await writer.drain()
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    async with asyncio.timeout(10):
        await upstream.head_seen.wait()
    assert upstream.received.startswith(hello)
    writer.close()


async def test_a_plain_request_naming_another_host_is_refused(
    proxy: tuple[EgressProxy, int], upstream: Upstream
) -> None:
    request = f"GET http://allowed.test:{upstream.port}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n".encode()
    answer = await exchange(proxy[1], request)
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"Host header" in answer
    assert upstream.received == b""


async def test_only_the_first_request_of_a_connection_goes_upstream(
    proxy: tuple[EgressProxy, int], upstream: Upstream
) -> None:
    body = b"a=1"
    first = (
        f"POST http://allowed.test:{upstream.port}/form HTTP/1.1\r\nHost: allowed.test:{upstream.port}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    smuggled = b"GET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    answer = await exchange(proxy[1], first + smuggled)
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"ok")
    assert upstream.received.startswith(b"POST /form HTTP/1.1\r\n")
    assert b"a=1" in upstream.received
    assert b"evil.test" not in upstream.received
    assert b"/admin" not in upstream.received


@pytest.mark.parametrize(
    "request_line",
    [
        pytest.param(b"GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n", id="not-absolute"),
        pytest.param(b"CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n\r\n", id="no-port"),
        pytest.param(b"GET ftp://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", id="ftp"),
        pytest.param(b"\x16\x03\x01garbage\r\n\r\n", id="not-http"),
    ],
)
async def test_a_malformed_request_gets_a_400(proxy: tuple[EgressProxy, int], request_line: bytes) -> None:
    assert (await exchange(proxy[1], request_line)).startswith(b"HTTP/1.1 400")


class UpstreamProxy:
    """A loopback CONNECT proxy recording what it was asked, tunnelling to `Upstream`."""

    def __init__(self, target: Upstream) -> None:
        self.target = target
        self.asked: list[bytes] = []
        self.port = 0

    async def start(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.asked.append(await reader.readuntil(b"\r\n\r\n"))
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target.port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        up_writer.write(await reader.read(65536))
        writer.write(await up_reader.read(65536))
        await writer.drain()
        writer.close()
        up_writer.close()


async def test_through_an_upstream_proxy_the_policy_still_decides_every_host(upstream: Upstream) -> None:
    chained = UpstreamProxy(upstream)
    server = await chained.start()
    policy = EgressPolicy(mode="allowlist", allow=["allowed.test"])
    served = EgressProxy(policy, where="test", upstream=f"http://user:pw@127.0.0.1:{chained.port}")
    port = await served.start()
    try:
        refused = await exchange(port, b"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 403")
        assert chained.asked == [], "a refused host never reaches the upstream proxy"
        plain = await exchange(port, b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        assert plain.startswith(b"HTTP/1.1 403")

        hello = client_hello("files.allowed.test")
        connect = b"CONNECT files.allowed.test:443 HTTP/1.1\r\nHost: files.allowed.test\r\n\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(connect + hello + b"\r\n\r\n")
        await writer.drain()
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        async with asyncio.timeout(10):
            await upstream.head_seen.wait()
        writer.close()
    finally:
        await served.stop()
        server.close()
    (asked,) = chained.asked
    assert asked.startswith(b"CONNECT files.allowed.test:443 HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic dXNlcjpwdw==" in asked  # user:pw
    assert upstream.received.startswith(hello)


def test_only_an_http_upstream_proxy_can_carry_the_policy() -> None:
    with pytest.raises(ValueError, match="only an http:// proxy"):
        EgressProxy(EgressPolicy(mode="allowlist"), where="test", upstream="socks5://127.0.0.1:1080")
