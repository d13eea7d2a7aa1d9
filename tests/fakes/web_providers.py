"""Fake web providers on 127.0.0.1 speaking their real HTTP APIs, for the web tools' tests.

- `FakeTavily`: POST /search (key in the body or as Bearer), `results` and `images`.
- `FakeSearxng`: GET /search?format=json&categories=..., 403 when JSON output is off.
- `FakeJina`: GET /<url> answered with Jina Reader's text (Title, URL Source, Markdown Content).
- `FakeFirecrawl`: POST /v1/scrape answered with {"success", "data": {"markdown", "metadata"}}.
- `FakeWebsite`: plain pages of any content type, redirects.

Each can misbehave on request: `fail_with = 500` (an error in the provider's own
shape), `hang = True` (no answer until the server stops), `not_json = True`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from tests.fakes._server import LocalServer


class _FakeProvider(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.app = FastAPI()
        self.fail_with: int | None = None
        self.hang = False
        self.not_json = False
        self._stopping = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def error_body(self, status: int) -> dict[str, Any]:
        return {"error": f"internal error {status}"}

    async def trouble(self) -> Response | None:
        """The scripted misbehaviour, if any, instead of a normal answer."""
        if self.hang:
            self.changed()
            await self._stopping.wait()
            return Response(status_code=503)
        if self.fail_with is not None:
            return JSONResponse(self.error_body(self.fail_with), self.fail_with)
        if self.not_json:
            return Response("<html><body>502 Bad Gateway</body></html>", media_type="text/html")
        return None

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()  # hanging handlers finish instead of being left pending
        await super().__aexit__(*exc)


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


@dataclass
class Hit:
    title: str
    url: str
    content: str


class FakeTavily(_FakeProvider):
    def __init__(self, api_key: str = "tvly-test") -> None:
        super().__init__()
        self.api_key = api_key
        self.results: list[Hit] = []
        self.images: list[tuple[str, str]] = []  # (url, description)
        self.app.post("/search")(self._search)

    def error_body(self, status: int) -> dict[str, Any]:
        return {"detail": {"error": f"Internal server error ({status})"}}

    async def _search(self, request: Request) -> Any:
        body = await request.json()
        self.record("search", {**body, "bearer": _bearer(request)})
        if self.api_key not in (body.get("api_key"), _bearer(request)):
            return JSONResponse({"detail": {"error": "Unauthorized: missing or invalid API key."}}, 401)
        if (trouble := await self.trouble()) is not None:
            return trouble
        limit = int(body.get("max_results", 5))
        answer: dict[str, Any] = {
            "query": body["query"],
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": [
                {"title": h.title, "url": h.url, "content": h.content, "score": 0.9, "raw_content": None}
                for h in self.results[:limit]
            ],
            "response_time": 0.42,
        }
        if body.get("include_images"):
            if body.get("include_image_descriptions"):
                answer["images"] = [{"url": u, "description": d} for u, d in self.images]
            else:
                answer["images"] = [u for u, _ in self.images]
        return answer


@dataclass
class Image:
    title: str
    img_src: str
    thumbnail_src: str
    page: str


class FakeSearxng(_FakeProvider):
    def __init__(self) -> None:
        super().__init__()
        self.json_enabled = True
        self.results: list[Hit] = []
        self.images: list[Image] = []
        self.app.get("/search")(self._search)

    async def _search(self, request: Request) -> Any:
        params = dict(request.query_params)
        self.record("search", params)
        if params.get("format") != "json" or not self.json_enabled:
            return PlainTextResponse("403 Forbidden", 403)
        if (trouble := await self.trouble()) is not None:
            return trouble
        if params.get("categories") == "images":
            results: list[dict[str, Any]] = [
                {
                    "template": "images.html",
                    "url": i.page,
                    "title": i.title,
                    "content": "",
                    "img_src": i.img_src,
                    "thumbnail_src": i.thumbnail_src,
                    "img_format": "jpeg",
                    "engine": "bing images",
                    "category": "images",
                }
                for i in self.images
            ]
        else:
            results = [
                {
                    "template": "default.html",
                    "url": h.url,
                    "title": h.title,
                    "content": h.content,
                    "engine": "duckduckgo",
                    "engines": ["duckduckgo", "brave"],
                    "score": 2.0,
                    "category": "general",
                }
                for h in self.results
            ]
        return {
            "query": params.get("q", ""),
            "number_of_results": len(results),
            "results": results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }


def _jina_error(code: int, name: str, message: str) -> dict[str, Any]:
    """Jina Reader's error body."""
    return {
        "data": None,
        "code": code,
        "name": name,
        "status": code * 100 + 3,
        "message": message,
        "readableMessage": f"{name}: {message}",
    }


class FakeJina(_FakeProvider):
    def __init__(self, api_key: str | None = None) -> None:
        super().__init__()
        self.api_key = api_key  # None: key-less use allowed
        self.pages: dict[str, tuple[str, str]] = {}  # url -> (title, markdown)
        self.app.get("/{target:path}")(self._read)

    def error_body(self, status: int) -> dict[str, Any]:
        return _jina_error(status, "InternalServerError", "Internal server error")

    async def _read(self, target: str, request: Request) -> Any:
        url = target + (f"?{request.url.query}" if request.url.query else "")
        self.record("read", {"url": url, "bearer": _bearer(request)})
        if self.api_key is not None and _bearer(request) != self.api_key:
            return JSONResponse(_jina_error(401, "AuthenticationFailedError", "Invalid API key"), 401)
        if (trouble := await self.trouble()) is not None:
            return trouble
        if url not in self.pages:
            message = f"Failed to goto {url}: net::ERR_NAME_NOT_RESOLVED"
            return JSONResponse(_jina_error(422, "AssertionError", message), 422)
        title, markdown = self.pages[url]
        return PlainTextResponse(f"Title: {title}\n\nURL Source: {url}\n\nMarkdown Content:\n{markdown}\n")


class FakeFirecrawl(_FakeProvider):
    def __init__(self, api_key: str = "fc-test") -> None:
        super().__init__()
        self.api_key = api_key
        self.pages: dict[str, tuple[str, str]] = {}  # url -> (title, markdown)
        self.app.post("/v1/scrape")(self._scrape)

    def error_body(self, status: int) -> dict[str, Any]:
        return {"success": False, "error": f"An unexpected error occurred ({status})"}

    async def _scrape(self, request: Request) -> Any:
        body = await request.json()
        self.record("scrape", {**body, "bearer": _bearer(request)})
        if _bearer(request) != self.api_key:
            return JSONResponse({"success": False, "error": "Unauthorized: Invalid token"}, 401)
        if (trouble := await self.trouble()) is not None:
            return trouble
        if body["url"] not in self.pages:
            return JSONResponse({"success": False, "error": "All scraping engines failed!"}, 500)
        title, markdown = self.pages[body["url"]]
        metadata = {"title": title, "sourceURL": body["url"], "url": body["url"], "statusCode": 200}
        return {"success": True, "data": {"markdown": markdown, "metadata": metadata}}


class FakeWebsite(_FakeProvider):
    """Pages by path: `site.page("/a", b"...", "text/html")`, `site.redirect("/old", "/a")`."""

    def __init__(self) -> None:
        super().__init__()
        self._pages: dict[str, tuple[bytes, str | None, int]] = {}
        self._redirects: dict[str, str] = {}
        self.app.get("/{path:path}")(self._get)

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def page(self, path: str, body: bytes | str, content_type: str | None, status: int = 200) -> str:
        data = body.encode() if isinstance(body, str) else body
        self._pages[path] = (data, content_type, status)
        return self.url(path)

    def redirect(self, path: str, to: str) -> str:
        self._redirects[path] = to
        return self.url(path)

    async def _get(self, path: str) -> Response:
        self.record("get", {"path": "/" + path})
        if (trouble := await self.trouble()) is not None:
            return trouble
        if "/" + path in self._redirects:
            return RedirectResponse(self._redirects["/" + path], 302)
        if "/" + path not in self._pages:
            return PlainTextResponse("Not Found", 404)
        body, content_type, status = self._pages["/" + path]
        response = Response(body, status_code=status)
        if content_type is not None:
            response.headers["content-type"] = content_type
        return response
