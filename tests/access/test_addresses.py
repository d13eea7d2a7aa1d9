"""The SSRF guard (access/addresses.py): every spelling of a private or metadata address is refused
before a connection is made, by web_fetch and by the browser's egress proxy alike."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import sys

import pytest

from access.addresses import refusal_reason
from tests.conftest import REPO

REFUSED = [
    pytest.param("127.0.0.1", id="loopback"),
    pytest.param("0.0.0.0", id="unspecified"),
    pytest.param("10.1.2.3", id="private-10"),
    pytest.param("172.16.0.1", id="private-172"),
    pytest.param("192.168.1.1", id="private-192"),
    pytest.param("169.254.169.254", id="metadata-aws"),
    pytest.param("169.254.170.2", id="metadata-ecs"),
    pytest.param("100.100.100.200", id="metadata-alibaba"),
    pytest.param("192.0.0.192", id="metadata-oracle"),
    pytest.param("168.63.129.16", id="metadata-azure"),
    pytest.param("fd00:ec2::254", id="metadata-aws-ipv6"),
    pytest.param("100.64.0.1", id="cgnat"),
    pytest.param("224.0.0.1", id="multicast"),
    pytest.param("255.255.255.255", id="broadcast"),
    pytest.param("::1", id="ipv6-loopback"),
    pytest.param("::", id="ipv6-unspecified"),
    pytest.param("fe80::1", id="ipv6-link-local"),
    pytest.param("fc00::1", id="ipv6-unique-local"),
    pytest.param("::ffff:127.0.0.1", id="ipv4-mapped-loopback"),
    pytest.param("::ffff:a9fe:a9fe", id="ipv4-mapped-metadata-hex"),
    pytest.param("::127.0.0.1", id="ipv4-compatible-loopback"),
    pytest.param("::a9fe:a9fe", id="ipv4-compatible-metadata"),
    pytest.param("::ffff:0:a9fe:a9fe", id="ipv4-translated-metadata"),
    pytest.param("64:ff9b::a9fe:a9fe", id="nat64-metadata"),
    pytest.param("64:ff9b::169.254.169.254", id="nat64-metadata-dotted"),
    pytest.param("64:ff9b::7f00:1", id="nat64-loopback"),
    pytest.param("64:ff9b::a01:203", id="nat64-private"),
    pytest.param("64:ff9b:1::a9fe:a9fe", id="nat64-local-use"),
    pytest.param("64:ff9b:1:ffff::1", id="nat64-local-use-other"),
    pytest.param("2002:a9fe:a9fe::", id="6to4-metadata"),
    pytest.param("2002:7f00:1::1", id="6to4-loopback"),
    pytest.param("2002:c0a8:101::1", id="6to4-private"),
    pytest.param("2001:0:4136:e378:8000:63bf:80ff:fffe", id="teredo-loopback"),
    pytest.param("2001:0:4136:e378:8000:63bf:5601:5601", id="teredo-metadata"),
    pytest.param("ff02::1", id="ipv6-multicast"),
]

PUBLIC = [
    pytest.param("93.184.216.34", id="ipv4"),
    pytest.param("2606:2800:220:1:248:1893:25c8:1946", id="ipv6"),
    pytest.param("64:ff9b::5db8:d822", id="nat64-of-public"),
    pytest.param("2002:5db8:d822::1", id="6to4-of-public"),
]


@pytest.mark.parametrize("address", REFUSED)
def test_private_and_metadata_spellings_are_refused(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_and_their_translations_pass(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None


# In a network namespace of its own (`unshare -rn`) the probe puts the hostile addresses on its
# loopback, so a connection to any of them would succeed and be counted; it then asks web_fetch and
# the browser's egress proxy for each one, as a literal in the URL and as a name resolving to it.
# A public address on the same loopback shows the connections could have been made.
PROBE = r"""
import asyncio, json, socket, subprocess, sys
from agents.tools.community import _direct
from browser.egress import EgressProxy

HOSTILE = json.loads(sys.argv[1])
PUBLIC = "93.184.216.34"
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
for address in [*HOSTILE, PUBLIC]:
    if address not in ("127.0.0.1", "::1") and not address.startswith("::ffff:"):
        # nodad: an IPv6 address is otherwise tentative until duplicate address detection ends, and
        # binding to it fails meanwhile (EADDRNOTAVAIL on a loaded machine)
        v6 = ":" in address
        command = ["ip", "-6" if v6 else "-4", "addr", "add", address, "dev", "lo"]
        subprocess.run([*command, "nodad"] if v6 else command, check=True)
connections = {}


class Loop(asyncio.SelectorEventLoop):
    async def getaddrinfo(self, host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if not name.endswith(".hostile.test"):
            return await super().getaddrinfo(host, port, *args, **kwargs)
        address = HOSTILE[int(name.split(".")[0][1:])]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]


def counting(address):
    async def answer(reader, writer):
        connections[address] = connections.get(address, 0) + 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsecret")
        await writer.drain()
        writer.close()
    return answer


async def through_proxy(proxy_port, url):
    # As Chromium asks its proxy: an absolute URL, IPv6 hosts in brackets.
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
    writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


def url_host(address):
    return f"[{address}]" if ":" in address else address


async def main():
    servers = []
    plain = [a for a in HOSTILE if not a.startswith("::ffff:")]
    port = 0
    for address in [PUBLIC, *plain]:
        server = await asyncio.start_server(counting(address), address, port)
        port = server.sockets[0].getsockname()[1]
        servers.append(server)
    outcomes = {}
    targets = [(a, url_host(a)) for a in HOSTILE] + [(a, f"h{i}.hostile.test") for i, a in enumerate(HOSTILE)]
    proxy = EgressProxy(allow_private=False)
    proxy_port = await proxy.start()
    for address, host in [*targets, (PUBLIC, PUBLIC)]:
        url = f"http://{host}:{port}/"
        try:
            page = await _direct.fetch(url, timeout_seconds=5, max_bytes=1000, allow_private_networks=False)
            fetched = page.body.decode()
        except Exception as exc:
            fetched = type(exc).__name__
        outcomes[host] = [fetched, await through_proxy(proxy_port, url)]
    await proxy.stop()
    print(json.dumps({"outcomes": outcomes, "connections": connections}))


Loop().run_until_complete(main())
"""

HOSTILE_ON_LOOPBACK = [
    "127.0.0.1",
    "::1",
    "::ffff:127.0.0.1",
    "169.254.169.254",
    "100.100.100.200",
    "192.0.0.192",
    "168.63.129.16",
    "fd00:ec2::254",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
    "2001:0:4136:e378:8000:63bf:5601:5601",
    "::a9fe:a9fe",
]


def test_every_spelling_is_refused_before_any_connection_by_web_fetch_and_the_browser() -> None:
    usable = shutil.which("ip") and shutil.which("unshare")
    if not usable or subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False).returncode:
        pytest.skip("needs `unshare -rn` and `ip` (a private network namespace keeps it off the network)")
    done = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", PROBE, json.dumps(HOSTILE_ON_LOOPBACK)],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    public = seen["outcomes"].pop("93.184.216.34")
    assert public == ["secret", 200], "a public address is reachable, so refusals are the guard's"
    for host, (fetched, status) in seen["outcomes"].items():
        assert fetched == "FetchRefused", f"web_fetch reached {host}"
        assert status == 403, f"the browser proxy reached {host}"
    assert seen["connections"] == {"93.184.216.34": 2}, "no hostile address saw a connection"
