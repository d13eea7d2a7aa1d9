"""The browser component: Chromium pages per thread, driven over the bus.

`<prefix>.browser.act` (the `browser` micro service, one queue group) takes what needs no open
page: `navigate` (this process then holds the thread's page) and `capture` (a fresh page of its
own). The process holding a thread's page also listens on `<prefix>.browser.thread.<token>`
(`bus.messages.browser.browser_thread_subject`) for as long as it holds it; callers try that
subject first, so every later action reaches the page it is about. Many processes share the
threads this way; one that dies takes its pages along, and its callers get "no responders" there:
the tool says the page is lost, and the next `navigate` opens it anew in another process.

Each request carries its run's egress policy (`access.egress`): under `none` the browser refuses
every action but `close`; under an allowlist the thread's page (and a capture's) has a proxy of its
own holding it, for every request the page makes, and a page opened under another policy is
closed first. Unset or `all`: public hosts, as always.

Screenshots and captures go straight to the thread's outputs in the object store (the gateway
serves them as artifacts); after each step the page's latest frame is kept at
`outputs/.browser/latest.jpg` for the live view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import ObjectMeta

from access import egress
from access.egress import web_binding
from browser.pages import ActionFailed, PageGone, Pages, Session
from bus import Bus, component_ready
from bus.errors import EnvelopeError
from bus.files import output_key
from bus.layout import OUTPUTS
from bus.messages import EgressPolicy, ErrorInfo, decode, encode
from bus.messages.browser import OPENING_ACTIONS, BrowserReply, BrowserRequest, browser_thread_subject
from bus.service import Endpoint, Running, ServiceError, start_service
from bus.tasks import until_cancelled
from config import AppConfig

log = logging.getLogger(__name__)

FRAME = ".browser/latest.jpg"  # under outputs: the live view's picture of the thread's page
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _output_name(filename: str | None, default: str, extension: str) -> str:
    stem = (filename or "").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    stem = _SAFE_NAME.sub("_", stem).strip("._-")[:100] or default
    return f"{stem}.{extension}"


class BrowserService:
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config.browser
        self.pages = Pages(config.browser)
        self.pages.on_closed.append(self._forget)
        self._subscriptions: dict[tuple[str, str], Subscription] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ the bus side

    async def act(self, req: BrowserRequest) -> BrowserReply:
        """A request from the queue group: only actions that start from nothing are taken here."""
        if req.action not in OPENING_ACTIONS:
            raise ServiceError(
                "no page is open for this thread (it was closed, or its browser stopped); "
                "open one with browser_navigate",
                "not_found",
            )
        return await self.handle(req)

    async def handle(self, req: BrowserRequest) -> BrowserReply:
        started = time.monotonic()
        policy = web_binding(req.egress)  # the run's, when it limits the browser
        try:
            if req.action == "close":
                closed = await self.pages.close(req.user_id, req.thread_id)
                return BrowserReply(text="Browser page closed." if closed else "No browser page was open.")
            if policy is not None and policy.mode == "none":
                reason = f"the egress policy ({policy.source}) allows no network access"
                target = urlsplit(req.url or "").hostname or f"({req.action})"
                egress.log_refusal("browser", req.run_id, target, None, reason)
                raise ServiceError(f"the browser cannot be used in this run: {reason}", "not_allowed")
            if req.action == "capture":
                return await self._capture(req, policy)
            changed = await self.pages.conform(req.user_id, req.thread_id, policy, req.run_id)
            if req.action == "navigate":
                if not req.url:
                    raise ServiceError("navigate needs a url", "invalid")
                await self.pages.check_url(req.url, policy, req.run_id)  # refused before any page is made
                session = await self.pages.open(req.user_id, req.thread_id, policy, req.run_id)
                await self._listen(req.user_id, req.thread_id)
            elif changed:
                raise ServiceError(
                    "the page was opened under another network policy than this run's, so it was "
                    "closed; open it again with browser_navigate",
                    "not_found",
                )
            else:
                session = self.pages.get(req.user_id, req.thread_id)
            async with session.lock:
                reply = await self._on_page(session, req)
        except PageGone:
            raise ServiceError(
                "no page is open for this thread (it was closed after being idle); "
                "open one with browser_navigate",
                "not_found",
            ) from None
        except ActionFailed as exc:
            raise ServiceError(str(exc), "invalid") from None
        log.info(
            "browser %s for thread %s of %s in %.2fs",
            req.action,
            req.thread_id,
            req.user_id,
            time.monotonic() - started,
        )
        return reply

    async def _listen(self, user_id: str, thread_id: str) -> None:
        key = (user_id, thread_id)
        if key in self._subscriptions:
            return
        subject = browser_thread_subject(self.bus.subjects.prefix, user_id, thread_id)
        self._subscriptions[key] = await self.bus.nc.subscribe(subject, cb=self._on_thread_message)

    def _forget(self, user_id: str, thread_id: str) -> None:
        subscription = self._subscriptions.pop((user_id, thread_id), None)
        if subscription is not None:
            self._spawn(subscription.unsubscribe())

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_thread_message(self, msg: Msg) -> None:
        self._spawn(self._answer(msg))

    async def _answer(self, msg: Msg) -> None:
        try:
            reply = await self.handle(decode(BrowserRequest, msg.data))
        except EnvelopeError as exc:
            reply = BrowserReply(error=ErrorInfo(code="invalid", message=str(exc)))
        except ServiceError as exc:
            reply = BrowserReply(error=ErrorInfo(code=exc.code, message=exc.message))
        except Exception as exc:
            log.exception("browser: an action failed")
            reply = BrowserReply(error=ErrorInfo(code="internal", message=f"{type(exc).__name__}: {exc}"))
        with contextlib.suppress(Exception):
            await msg.respond(encode(reply))

    # ------------------------------------------------------------------ actions on a page

    async def _on_page(self, session: Session, req: BrowserRequest) -> BrowserReply:
        page = session.page
        pages = self.pages
        prefix = ""
        if req.action == "navigate":
            assert req.url is not None
            await pages.goto(page, req.url, session.proxy, session.policy, req.run_id)
            prefix = f"Opened {page.url}."
        elif req.action == "click":
            element = await pages.element(page, _need(req.ref, "click needs ref"))
            try:
                await element.click()
            except Exception as exc:
                raise ActionFailed(f"could not click [{req.ref}]: {str(exc).splitlines()[0]}") from None
            await pages.settle(session.page)
            prefix = f"Clicked [{req.ref}]."
        elif req.action == "type":
            element = await pages.element(page, _need(req.ref, "type needs ref"))
            try:
                await element.fill(req.text or "")
                if req.submit:
                    await element.press("Enter")
            except Exception as exc:
                raise ActionFailed(f"could not type into [{req.ref}]: {str(exc).splitlines()[0]}") from None
            await pages.settle(session.page)
            prefix = f"Typed into [{req.ref}]{' and pressed Enter' if req.submit else ''}."
        elif req.action == "scroll":
            height = self.config.viewport_height * (1 if req.direction == "down" else -1)
            await page.mouse.wheel(0, height * 0.8)
            await page.wait_for_timeout(200)  # let the scroll's layout happen before reading it
            prefix = f"Scrolled {req.direction}."
        elif req.action == "back":
            await page.go_back()
            await pages.settle(session.page)
            prefix = "Went back."
        elif req.action == "text":
            return BrowserReply(
                url=page.url, title=await page.title(), text=await pages.text(page) or "(no visible text)"
            )
        elif req.action == "links":
            return BrowserReply(url=page.url, title=await page.title(), text=await pages.links(page))
        elif req.action == "screenshot":
            name = _output_name(req.filename, f"screenshot-{int(time.time())}", "png")
            data = await page.screenshot(full_page=req.full_page, type="png")
            saved = await self._save(req, name, data, "image/png")
            return BrowserReply(
                url=page.url, title=await page.title(), text=f"Saved a screenshot: {saved}", saved=saved
            )
        page = session.page  # a click may have opened a new tab, which the session follows
        snapshot = await pages.snapshot(page)
        frame = await self._frame(req, page)
        return BrowserReply(
            url=page.url, title=await page.title(), text=f"{prefix}\n\n{snapshot}".strip(), frame=frame
        )

    async def _capture(self, req: BrowserRequest, policy: EgressPolicy | None) -> BrowserReply:
        if not req.url:
            raise ServiceError("capture needs a url", "invalid")
        await self.pages.check_url(req.url, policy, req.run_id)
        context, proxy = await self.pages.new_context(policy, req.run_id)
        try:
            page = await context.new_page()
            await self.pages.goto(page, req.url, proxy, policy, req.run_id)
            host = re.sub(r"[^A-Za-z0-9]+", "-", page.url.split("//", 1)[-1].split("/", 1)[0]).strip("-")
            name = _output_name(req.filename, f"capture-{host}", req.format)
            if req.format == "pdf":
                data, kind = await page.pdf(print_background=True), "application/pdf"
            else:
                data = await page.screenshot(full_page=req.full_page, type=req.format)
                kind = f"image/{req.format}"
            saved = await self._save(req, name, data, kind)
            title = await page.title()
            return BrowserReply(
                url=page.url, title=title, text=f"Captured {page.url} ({title}) to {saved}", saved=saved
            )
        finally:
            with contextlib.suppress(Exception):
                await context.close()
            if proxy is not None:
                await proxy.stop()

    async def _save(self, req: BrowserRequest, relative: str, data: bytes, content_type: str) -> str:
        key = output_key(req.user_id, req.thread_id, relative)
        meta = ObjectMeta(name=key, headers={"Content-Type": content_type, "Antler-Size": str(len(data))})
        await (await self.bus.files()).put(key, data, meta=meta)
        return f"{OUTPUTS}/{relative}"

    async def _frame(self, req: BrowserRequest, page: Any) -> str | None:
        """The live view's latest picture of the page; a failure never fails the action."""
        try:
            data = await page.screenshot(type="jpeg", quality=60)
            return await self._save(req, FRAME, data, "image/jpeg")
        except Exception as exc:
            log.info("browser: no live frame for thread %s: %s", req.thread_id, exc)
            return None

    async def reap_idle(self) -> None:
        while True:
            await asyncio.sleep(min(self.config.idle_seconds / 4, 30))
            await self.pages.close_idle()

    async def stop(self) -> None:
        await self.pages.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _need(value: int | None, message: str) -> int:
    if value is None:
        raise ActionFailed(message)
    return value


async def serve_browser(bus: Bus, config: AppConfig) -> tuple[BrowserService, Running]:
    service = BrowserService(bus, config)
    await service.pages.start()
    running = await start_service(
        bus,
        "browser",
        [Endpoint("act", BrowserRequest, BrowserReply, service.act)],
        description="Chromium pages per thread for the agent's browser tools",
        concurrency=service.config.max_sessions * 2,
    )
    return service, running


async def run(bus: Bus, config: AppConfig) -> None:
    """The browser component: serve until cancelled, then close every page and Chromium."""
    service, running = await serve_browser(bus, config)
    component_ready()
    reaper = asyncio.create_task(service.reap_idle())
    try:
        await until_cancelled()
    finally:
        reaper.cancel()
        await running.stop()
        await service.stop()
