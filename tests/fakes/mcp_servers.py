"""Real MCP servers for tests, written with the `mcp` package's FastMCP.

`python -m tests.fakes.mcp_servers stdio` serves the `notes` tools over stdio; `... reports`
serves `big_report` (results of many MB) over stdio.
`OAuthMcpServer` serves the `weather` tools over streamable HTTP on 127.0.0.1,
behind a bearer token from its own OAuth token endpoint (`/oauth/token`,
client_credentials and refresh_token grants).
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from tests.fakes._server import LocalServer


def notes_server() -> FastMCP:
    mcp = FastMCP("notes")

    @mcp.tool()
    def add_numbers(a: int, b: int) -> str:
        """Add two numbers."""
        return f"the sum is {a + b}"

    @mcp.tool()
    def server_pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @mcp.tool()
    def server_environment() -> str:
        """Which environment variables this server process has (names only)."""
        return ", ".join(sorted(os.environ))

    return mcp


def reports_server() -> FastMCP:
    mcp = FastMCP("reports")

    @mcp.tool()
    def big_report(megabytes: int) -> str:
        """A report of about `megabytes` MB: numbered lines, a needle in the middle line."""
        count = megabytes * 1024 * 1024 // 64
        lines = [f"line {n:07d} " + "x" * 50 for n in range(count)]
        lines[count // 2] = f"line {count // 2:07d} NEEDLE-IN-THE-MIDDLE"
        return "\n".join(lines)

    return mcp


class OAuthMcpServer(LocalServer):
    """The `weather` MCP server over streamable HTTP; requests need the newest token it issued."""

    def __init__(self, expires_in: int = 3600) -> None:
        super().__init__()
        self.expires_in = expires_in
        self.token_requests: list[dict[str, Any]] = []
        self.valid: set[str] = set()
        self._ids = itertools.count(1)
        mcp = FastMCP("weather", stateless_http=True, json_response=True)

        @mcp.tool()
        def forecast(city: str) -> str:
            """Tomorrow's weather in a city."""
            return f"sunny in {city}"

        self.mcp_app = mcp.streamable_http_app()
        self.session_manager = mcp.session_manager

        async def token(request: Request) -> JSONResponse:
            form = dict(await request.form())
            self.token_requests.append(form)
            if form.get("client_secret") != "s3cret" and form.get("grant_type") != "refresh_token":
                return JSONResponse({"error": "invalid_client"}, 401)
            issued = f"tok-{next(self._ids)}"
            self.valid = {issued}  # only the newest token works
            return JSONResponse(
                {
                    "access_token": issued,
                    "token_type": "bearer",
                    "expires_in": self.expires_in,
                    "refresh_token": f"refresh-{issued}",
                }
            )

        inner = self.mcp_app

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode()
            if not auth.lower().startswith("bearer ") or auth[7:] not in self.valid:
                response = JSONResponse({"error": "invalid_token"}, 401)
                await response(scope, receive, send)
                return
            await inner(scope, receive, send)

        self.app = Starlette(routes=[Route("/oauth/token", token, methods=["POST"]), Mount("/", app=guarded)])
        self._running: Any = None

    async def __aenter__(self) -> OAuthMcpServer:
        self._running = self.session_manager.run()  # what the app's lifespan would do
        await self._running.__aenter__()
        await super().__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await super().__aexit__(*exc)
        await self._running.__aexit__(None, None, None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/oauth/token"

    def revoke(self) -> None:
        """Every token issued so far stops working (the next request is answered 401)."""
        self.valid = set()


if __name__ == "__main__":
    if sys.argv[1:] == ["stdio"]:
        notes_server().run("stdio")
    elif sys.argv[1:] == ["reports"]:
        reports_server().run("stdio")
