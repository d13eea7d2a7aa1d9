"""Methods as the OpenAPI document lists them: a 405 with the documented `Allow` for any other.

Starlette routes one method set per route and takes the first route that matches both path and
method, which disagreed with the document in two ways: a 405 named only the methods of the first
route whose path matched (`/api/threads/{id}` is three routes: OPTIONS got `Allow: GET`), and a
literal path shadowed by a parameter route took that route's other methods (`PUT /api/skills/install`
reached `PUT /api/skills/{name}` for a skill called "install"; the document lists only POST there).
Here a request whose path is documented is answered 405, with `Allow` listing exactly the documented
methods of that path, unless its method is one of them; literal paths are matched before templated
ones, as the routes are declared. Undocumented paths (the web UI, /api/langgraph) route as before.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")


def documented_paths(spec: dict[str, Any]) -> list[tuple[re.Pattern[str], list[str]]]:
    """(path pattern, methods) per documented path, literal paths before templated ones."""
    found = []
    for template, operations in spec.get("paths", {}).items():
        parts = re.split(r"(\{[^}]+\})", template)
        pattern = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)
        methods = [m for m in _METHODS if m.lower() in operations]
        found.append((template.count("{"), re.compile(pattern), methods))
    found.sort(key=lambda entry: entry[0])
    return [(pattern, methods) for _, pattern, methods in found]


class MethodsAsDocumented:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._paths: list[tuple[re.Pattern[str], list[str]]] | None = None
        self._making: asyncio.Lock | None = None

    async def _documented(self, app: Any) -> list[tuple[re.Pattern[str], list[str]]]:
        """The document of the whole app, made once at the first request on a worker thread: it takes
        seconds of CPU on a busy machine, and the event loop (other requests, and the components that
        share this process under `antler up`) must go on meanwhile. `app.openapi` keeps it."""
        if self._making is None:
            self._making = asyncio.Lock()
        async with self._making:
            if self._paths is None:
                self._paths = documented_paths(await asyncio.to_thread(app.openapi))
        return self._paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            paths = self._paths if self._paths is not None else await self._documented(scope["app"])
            for pattern, methods in paths:
                if pattern.fullmatch(scope["path"]):
                    if scope["method"] not in methods:
                        allow = {"Allow": ", ".join(methods)}
                        refusal = JSONResponse({"detail": "Method Not Allowed"}, 405, headers=allow)
                        await refusal(scope, receive, send)
                        return
                    break
        await self.app(scope, receive, send)
