"""A small website on loopback for the browser's tests: a form, its result page, cookies, a redirect."""

from __future__ import annotations

import html

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from tests.fakes._server import LocalServer

FORM = """<!doctype html><html><head><title>Parcel tracker</title></head><body>
<h1>Track a parcel</h1>
<form action="/track" method="get">
  <label for="number">Tracking number</label> <input id="number" name="number" type="text">
  <button type="submit">Track</button>
</form>
<p><a href="/about">About the tracker</a></p>
</body></html>"""


class WebPages(LocalServer):
    """`/` a form; `/track?number=` its answer; `/remember?v=` sets a cookie `/cookie` shows;
    `/redirect?to=` redirects anywhere."""

    def __init__(self) -> None:
        super().__init__()
        app = FastAPI()
        self.app = app

        @app.get("/", response_class=HTMLResponse)
        async def form() -> str:
            return FORM

        @app.get("/track", response_class=HTMLResponse)
        async def track(number: str = "") -> str:
            shown = html.escape(number)
            return (
                f"<html><head><title>Parcel {shown}</title></head><body>"
                f"<p id='status'>Parcel {shown} is out for delivery in Lyon.</p>"
                "<a href='/'>Track another</a></body></html>"
            )

        @app.get("/about", response_class=HTMLResponse)
        async def about() -> str:
            return "<html><head><title>About</title></head><body><p>Made for tests.</p></body></html>"

        @app.get("/remember", response_class=HTMLResponse)
        async def remember(v: str) -> HTMLResponse:
            response = HTMLResponse(f"<html><body>remembered {html.escape(v)}</body></html>")
            response.set_cookie("secret", v)
            return response

        @app.get("/cookie", response_class=HTMLResponse)
        async def cookie(request: Request) -> str:
            value = html.escape(request.cookies.get("secret", "none"))
            return f"<html><head><title>cookie</title></head><body><p>cookie: {value}</p></body></html>"

        @app.get("/redirect")
        async def redirect(to: str) -> RedirectResponse:
            return RedirectResponse(to)
