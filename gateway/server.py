"""The gateway component: the FastAPI app served by uvicorn until cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Generator
from pathlib import Path

import uvicorn

from bus import Bus, component_ready
from config import AppConfig, extensions_path, read_raw_extensions
from gateway.app import create_app
from gateway.deps import Gateway
from gateway.rest.custom_skills import import_disk_skills
from gateway.rest.mcp import publish_extensions
from gateway.rest.skills import publish_skills

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its signal handling: the component runtime owns SIGTERM/SIGINT (and drains us)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            # Ready once uvicorn accepts on the socket: `antler run gateway` says "gateway: ready" on
            # it, which a rolling restart waits for before stopping the next copy.
            component_ready()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_host(config: AppConfig, has_accounts: bool = False) -> str:
    """The configured host, or loopback in single-user mode (no tokens, no accounts: no sign-in)."""
    host = config.gateway.host
    signs_in = bool(config.gateway.tokens) or has_accounts or bool(config.gateway.auth.oidc)
    if not signs_in and not _loopback(host):
        log.warning(
            "gateway: no tokens (gateway.tokens) and no accounts (antler user add), so it listens on "
            "127.0.0.1 only instead of %s",
            host,
        )
        return "127.0.0.1"
    return host


async def run(bus: Bus, config: AppConfig) -> None:
    gw = await Gateway.open(bus, config)
    if await asyncio.to_thread(extensions_path().is_file):
        # The gateway's extensions_config.json is what every runner uses, wherever it runs.
        await publish_extensions(gw, await asyncio.to_thread(read_raw_extensions, extensions_path()))
    await import_disk_skills(gw)  # custom skills installed before they were on the bus
    await publish_skills(gw)  # public skills and the store's custom ones, switched as its extensions say
    app = create_app(gw)
    open_mode = await gw.auth.is_open()
    host = bind_host(config, has_accounts=await gw.auth.has_accounts())
    sock = socket.create_server((host, config.gateway.port), reuse_port=False)
    # Answers leave at once: asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP
    # (this one's is 0), and without it a keep-alive client's every request waited ~40 ms (Nagle's
    # algorithm holding the body behind the headers until the client's delayed ACK). Accepted
    # connections inherit it on Linux.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=5
        )
    )
    if open_mode:
        log.info("gateway: no tokens and no accounts; every caller is user 'default' (loopback only)")
    url = f"http://{host}:{port}"
    log.info("gateway listening on %s (API at %s/api, docs at %s/docs)", url, url, url)
    url_file = Path(config.bus.data_dir) / "gateway.url"
    url_file.parent.mkdir(parents=True, exist_ok=True)
    url_file.write_text(url + "\n", encoding="utf-8")
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await asyncio.shield(task)
    finally:
        server.should_exit = True
        await task
        await gw.view.close()
        if gw.sso_http is not None:
            await gw.sso_http.aclose()
        url_file.unlink(missing_ok=True)
