"""A client that keeps its connection open (the LangGraph SDK, the web UI, any HTTP library's session)
gets each answer as soon as it is written: the gateway's connections have Nagle's algorithm off, so
an answer's body is never held behind its headers until the client's delayed ACK (about 40 ms per
request on Linux, which is what every keep-alive request used to cost)."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.asyncio


def server_side_of(port: int, peer: tuple[str, int]) -> socket.socket:
    """The gateway's end of the connection from `peer` (the gateway runs in this process)."""
    for name in os.listdir("/proc/self/fd"):
        try:
            candidate = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket
        try:
            inet = candidate.family in (socket.AF_INET, socket.AF_INET6)
            tcp = inet and candidate.type == socket.SOCK_STREAM
            if tcp and candidate.getsockname()[1] == port:
                if candidate.getpeername()[:2] == peer:
                    return candidate
        except OSError:
            pass
        candidate.close()
    raise AssertionError(f"no connection from {peer} on port {port}")


async def test_answers_on_a_kept_alive_connection_are_sent_without_delay(api_url: str) -> None:
    port = urlsplit(api_url).port
    assert port is not None
    peers: list[tuple[str, int]] = []

    async def remember_peer(response: httpx.Response) -> None:
        stream = response.extensions["network_stream"]
        peers.append(stream.get_extra_info("socket").getsockname()[:2])

    async with httpx.AsyncClient(
        base_url=api_url, headers={"x-api-key": "tok-ana"}, event_hooks={"response": [remember_peer]}
    ) as http:
        for _ in range(3):
            assert (await http.get("/api/models")).status_code == 200
        assert len(set(peers)) == 1, "one connection, kept alive"
        with server_side_of(port, peers[0]) as served:
            assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
