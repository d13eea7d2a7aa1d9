"""A sandboxed command's network under an allowlist: its own namespace, and the broker's proxy as its
only way out.

bwrap gives the command a network namespace with nothing but loopback (`--unshare-net`), so no
connection leaves it directly, whatever the program (raw sockets, DNS, UDP included). For the
duration of the command the broker serves an `access.egress_proxy.EgressProxy` with the run's
policy on a Unix socket in a private directory, bound read-only into the sandbox at
`SOCKET_DIR`; inside, `sandbox.egress_forwarder` (run by the sandbox's python3 before the
command) turns it into `127.0.0.1:PROXY_PORT`, which HTTP_PROXY and friends name, so curl, pip,
git, npm and Python's HTTP clients go through the proxy. Whatever the proxy refused comes back
with the command's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from access.egress_proxy import EgressProxy, Refused
from bus.messages import EgressPolicy

SOCKET_DIR = "/run/egress"
SOCKET_NAME = "proxy.sock"
PROXY_PORT = 3128
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
_FORWARDER = (Path(__file__).parent / "egress_forwarder.py").read_text(encoding="utf-8")

# What the usual tools read to find a proxy (curl, wget, pip, requests, httpx, git: the first ones;
# npm its own names). NO_PROXY is left unset: nothing inside is reachable around the proxy anyway.
PROXY_ENV = {
    name: PROXY_URL
    for name in (
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
    )
}


@dataclass
class Door:
    """What the provider adds to a command for the proxy: bwrap options, environment, the command."""

    bwrap_args: list[str]
    env: dict[str, str]
    command: str
    refusals: list[Refused] = field(default_factory=list)  # filled in when the command ends
    refused_total: int = 0


@contextlib.asynccontextmanager
async def proxied(
    policy: EgressPolicy, command: str, python: str, *, run_id: str | None
) -> AsyncIterator[Door]:
    """The proxy for one command, serving while the command runs; `python` is the sandbox's python3
    (run before the command, as `exec`, so the command keeps its process and exit status)."""
    # A directory of this command's own, on a short path (a Unix socket's is at most 107 bytes).
    host_dir = Path(await asyncio.to_thread(_socket_dir))
    proxy = EgressProxy(policy, where="sandbox", run_id=run_id)
    try:
        await proxy.start_unix(str(host_dir / SOCKET_NAME))  # mode 0666: the sandbox's uid connects
        inner = f"{SOCKET_DIR}/{SOCKET_NAME}"
        door = Door(
            bwrap_args=["--perms", "0755", "--dir", "/run", "--ro-bind", str(host_dir), SOCKET_DIR],
            env=dict(PROXY_ENV),
            command=(
                f"exec {shlex.quote(python)} -I -S -c {shlex.quote(_FORWARDER)} "
                f"{shlex.quote(inner)} {PROXY_PORT} {shlex.quote(command)}"
            ),
        )
        yield door
        door.refusals, door.refused_total = list(proxy.refusals), proxy.refused_total
    finally:
        await proxy.stop()
        await asyncio.to_thread(shutil.rmtree, host_dir, True)


def _socket_dir() -> str:
    temp = tempfile.gettempdir()
    made = tempfile.mkdtemp(prefix="antler-egress-", dir=temp if len(temp) <= 64 else "/tmp")
    os.chmod(made, 0o755)  # the sandbox's uid must reach the socket inside
    return made


def refusal_warnings(door: Door) -> list[str]:
    """The lines the command's result gets for what the proxy refused (a few, then a count)."""
    shown = door.refusals[:5]
    lines = [f"network: refused {r.host}{f':{r.port}' if r.port else ''}: {r.reason}" for r in shown]
    if door.refused_total > len(shown):
        lines.append(f"network: {door.refused_total - len(shown)} more connections were refused")
    return lines
