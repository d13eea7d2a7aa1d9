"""Chromium through Playwright: one browser per process, one isolated context (cookies, storage,
history) per thread, and what each action does to its page.

A thread's context lives while the thread uses it: closed after `browser.idle_seconds` unused, or
when `browser.max_sessions` are open and a new thread needs one (the least recently used goes).
Chromium's every connection goes through the egress proxy (`browser.egress`); a page opened for a
run whose egress policy limits it (`access.egress`: an allowlist) has a proxy of its own holding that
policy, for the page's every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from access import egress
from access.addresses import AddressRefused, UnresolvableHost
from access.egress_proxy import EgressProxy as SharedProxy
from browser.egress import EgressProxy, Refused, checked_addresses, run_proxy
from bus.messages import EgressPolicy
from bus.tasks import wait_for
from config.browser import BrowserConfig

log = logging.getLogger(__name__)

# Stamps each visible interactive element with a number the model addresses it by.
_SNAPSHOT_JS = r"""
() => {
  for (const old of document.querySelectorAll("[data-antler-ref]")) old.removeAttribute("data-antler-ref");
  const found = [];
  const nodes = document.querySelectorAll(
    "a[href], button, input, textarea, select, summary, [role=button], [role=link], [role=tab], " +
    "[role=checkbox], [role=menuitem], [contenteditable=true], [onclick]");
  for (const el of nodes) {
    const box = el.getBoundingClientRect();
    const style = window.getComputedStyle(el);
    if (box.width <= 0 || box.height <= 0) continue;
    if (style.visibility === "hidden" || style.display === "none") continue;
    if (el.type === "hidden") continue;
    const ref = found.length + 1;
    el.setAttribute("data-antler-ref", String(ref));
    const label = el.labels && el.labels.length ? el.labels[0].innerText : "";
    let name = (el.getAttribute("aria-label") || label || el.getAttribute("placeholder") ||
      el.innerText || el.value || el.getAttribute("name") || el.getAttribute("title") || "").trim();
    name = name.replace(/\s+/g, " ");
    if (name.length > 100) name = name.slice(0, 100) + "…";
    const field = (el.tagName === "INPUT" || el.tagName === "TEXTAREA") && el.type !== "password";
    const value = field ? el.value : "";
    found.push({ref, tag: el.tagName.toLowerCase(), role: el.getAttribute("role") || "",
                 type: el.getAttribute("type") || "", name, value: (value || "").slice(0, 60)});
    if (found.length >= 150) break;
  }
  return found;
}
"""

_LINKS_JS = r"""
() => Array.from(document.querySelectorAll("a[href]")).slice(0, 300).map(a => ({
  text: (a.innerText || a.getAttribute("aria-label") || "").trim().replace(/\s+/g, " ").slice(0, 100),
  href: a.href,
})).filter(l => /^https?:/.test(l.href))
"""


class PageGone(Exception):
    """This process holds no page for the thread (never opened, closed when idle, or evicted)."""


class ActionFailed(Exception):
    """An action the page could not do (no such element, a timeout, a refused address)."""


@dataclass
class Session:
    user_id: str
    thread_id: str
    context: BrowserContext
    page: Page
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    used: float = field(default_factory=time.monotonic)
    policy: EgressPolicy | None = None  # the run's egress policy it was opened under (None: public hosts)
    proxy: SharedProxy | None = None  # the proxy holding `policy`, its own


def web_address(url: str) -> tuple[str, int]:
    """Host and port of an absolute http(s) URL.

    Raises:
        ActionFailed: it is not one.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ActionFailed(f"{url!r}: only absolute http:// and https:// URLs can be opened")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ActionFailed(f"{url!r} has an invalid port") from None
    return parts.hostname, port


class Pages:
    """The process's Chromium and its threads' sessions."""

    def __init__(self, config: BrowserConfig) -> None:
        self.config = config
        self.proxy = EgressProxy(config.allow_private_networks)
        self.sessions: dict[tuple[str, str], Session] = {}
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._launching = asyncio.Lock()
        self._proxy_port = 0
        self.on_closed: list[Any] = []  # callbacks(user_id, thread_id) when a session goes

    async def start(self) -> None:
        self._proxy_port = await self.proxy.start()
        self._playwright = await async_playwright().start()
        await self._ensure_browser()

    async def stop(self) -> None:
        for key in list(self.sessions):
            await self.close(*key)
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await wait_for(self._browser.close(), 10)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await wait_for(self._playwright.stop(), 10)
        await self.proxy.stop()

    async def _ensure_browser(self) -> Browser:
        async with self._launching:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self._browser is not None:  # Chromium died: its pages went with it
                log.warning("Chromium is gone; starting it again (open pages were lost)")
                for key in list(self.sessions):
                    lost = self.sessions.pop(key, None)
                    if lost is not None and lost.proxy is not None:
                        await lost.proxy.stop()  # a run's page's own proxy goes with it
                    self._notify_closed(*key)
            assert self._playwright is not None
            flags = [
                "--headless",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-dev-shm-usage",
                f"--proxy-server=http://127.0.0.1:{self._proxy_port}",
                "--proxy-bypass-list=<-loopback>",  # loopback too goes through the address policy
                *self.config.chromium_flags,
            ]
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.config.chromium, args=flags, chromium_sandbox=False
            )
            log.info("Chromium started (%s)", self.config.chromium)
            return self._browser

    def _notify_closed(self, user_id: str, thread_id: str) -> None:
        for callback in self.on_closed:
            try:
                callback(user_id, thread_id)
            except Exception:
                log.exception("browser: a session-closed callback failed")

    async def new_context(
        self, policy: EgressPolicy | None = None, run_id: str | None = None
    ) -> tuple[BrowserContext, SharedProxy | None]:
        """A fresh context; under a run's `policy` (`access.egress.web_binding`) with a proxy of its
        own holding it (the caller stops it when the context goes)."""
        browser = await self._ensure_browser()
        options: dict[str, Any] = {}
        proxy = None
        if policy is not None:
            proxy = run_proxy(policy, run_id, self.config.allow_private_networks)
            # Playwright adds `<-loopback>` to a context's bypass list: loopback goes through it too.
            options["proxy"] = {"server": f"http://127.0.0.1:{await proxy.start()}"}
        try:
            context = await browser.new_context(
                viewport={"width": self.config.viewport_width, "height": self.config.viewport_height},
                accept_downloads=False,
                service_workers="block",
                **options,
            )
        except BaseException:
            if proxy is not None:
                await proxy.stop()
            raise
        context.set_default_timeout(self.config.timeout_seconds * 1000)
        return context, proxy

    def get(self, user_id: str, thread_id: str) -> Session:
        session = self.sessions.get((user_id, thread_id))
        if session is None or session.page.is_closed():
            raise PageGone(thread_id)
        session.used = time.monotonic()
        return session

    async def conform(
        self, user_id: str, thread_id: str, policy: EgressPolicy | None, run_id: str | None
    ) -> bool:
        """Close the thread's page if it was opened under another egress policy than the run's
        `policy` (another person's run, or the web UI's); True if it was. Under the same policy the
        page's proxy names this run in the log of refusals from now on."""
        session = self.sessions.get((user_id, thread_id))
        if session is None or policy is None:
            return False
        if session.policy == policy:
            if session.proxy is not None:
                session.proxy.run_id = run_id
            return False
        return await self.close(user_id, thread_id)

    async def open(
        self, user_id: str, thread_id: str, policy: EgressPolicy | None = None, run_id: str | None = None
    ) -> Session:
        """The thread's session, made when it has none (the least recently used goes when full)."""
        with contextlib.suppress(PageGone):
            return self.get(user_id, thread_id)
        while len(self.sessions) >= self.config.max_sessions:
            oldest = min(self.sessions.values(), key=lambda s: s.used)
            await self.close(oldest.user_id, oldest.thread_id)
        context, proxy = await self.new_context(policy, run_id)
        try:
            page = await context.new_page()
        except BaseException:
            with contextlib.suppress(Exception):
                await context.close()
            if proxy is not None:
                await proxy.stop()
            raise
        session = Session(user_id, thread_id, context, page, policy=policy, proxy=proxy)
        # A link opening a new tab: follow it in the thread's page, as one tab is what the model sees.
        context.on("page", lambda new: asyncio.ensure_future(self._adopt(session, new)))
        self.sessions[(user_id, thread_id)] = session
        log.info("browser page opened for thread %s of %s", thread_id, user_id)
        return session

    async def _adopt(self, session: Session, page: Page) -> None:
        if page is not session.page:
            session.page = page

    async def close(self, user_id: str, thread_id: str) -> bool:
        session = self.sessions.pop((user_id, thread_id), None)
        if session is None:
            return False
        with contextlib.suppress(Exception):
            await wait_for(session.context.close(), 10)
        if session.proxy is not None:
            await session.proxy.stop()
        self._notify_closed(user_id, thread_id)
        log.info("browser page closed for thread %s of %s", thread_id, user_id)
        return True

    async def close_idle(self) -> None:
        cutoff = time.monotonic() - self.config.idle_seconds
        for session in [s for s in self.sessions.values() if s.used < cutoff and not s.lock.locked()]:
            await self.close(session.user_id, session.thread_id)

    # ------------------------------------------------------------------ what actions do

    async def check_url(
        self, url: str, policy: EgressPolicy | None = None, run_id: str | None = None
    ) -> None:
        """Refuse an address outside the address policy, or outside the run's egress `policy`,
        before Chromium is even asked (a clear message; an egress refusal logged with the run)."""
        host, port = web_address(url)
        if policy is None:
            try:
                await checked_addresses(host, port, self.config.allow_private_networks)
            except Refused as exc:
                raise ActionFailed(f"{url} was refused: {exc}") from None
            return
        reason = egress.refusal(policy, host)
        try:
            if reason is None:
                await egress.addresses(policy, host, port, allow_private=self.config.allow_private_networks)
        except AddressRefused as exc:
            reason = f"{exc.address} is {exc.reason}; the browser opens only public web pages"
        except UnresolvableHost as exc:
            reason = f"the name does not resolve ({exc.detail})"
        if reason is not None:
            egress.log_refusal("browser", run_id, host, port, reason)
            raise ActionFailed(f"{url} was refused: {host}: {reason}")

    async def goto(
        self,
        page: Page,
        url: str,
        proxy: SharedProxy | None = None,
        policy: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> None:
        """Open `url` in `page`, whose connections go through `proxy` (the process's when None)."""
        await self.check_url(url, policy, run_id)
        proxy = proxy or self.proxy
        mark = len(proxy.refusals)
        try:
            await page.goto(url, wait_until="load")
        except PlaywrightError as exc:
            refused = proxy.refused_since(mark)
            if refused:
                raise ActionFailed(f"{url}: refused on the way: {refused[-1]}") from None
            raise ActionFailed(f"{url} could not be opened: {_first_line(exc)}") from None

    async def settle(self, page: Page) -> None:
        """Let what an action started (a navigation, a script) finish, within a short bound."""
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await page.wait_for_load_state("load", timeout=min(self.config.timeout_seconds, 10) * 1000)

    async def element(self, page: Page, ref: int) -> Any:
        locator = page.locator(f'[data-antler-ref="{int(ref)}"]')
        if await locator.count() == 0:
            raise ActionFailed(
                f"there is no element [{ref}] on the page now; take a new snapshot (browser_snapshot)"
            )
        return locator.first

    async def snapshot(self, page: Page) -> str:
        """The page's address, title and numbered interactive elements, as the model reads them."""
        try:
            elements = await page.evaluate(_SNAPSHOT_JS)
        except PlaywrightError as exc:
            raise ActionFailed(f"could not read the page: {_first_line(exc)}") from None
        lines = [f"URL: {page.url}", f"Title: {await page.title()}", ""]
        if not elements:
            lines.append("No interactive elements on the page.")
        else:
            lines.append("Interactive elements (use the [ref] numbers with browser_click and browser_type):")
            for el in elements:
                kind = el["role"] or el["tag"]
                if el["type"]:
                    kind += f" type={el['type']}"
                value = f' value="{el["value"]}"' if el["value"] else ""
                lines.append(f"[{el['ref']}] {kind}: {el['name'] or '(no text)'}{value}")
        return "\n".join(lines)

    async def text(self, page: Page) -> str:
        body = await page.evaluate("() => document.body ? document.body.innerText : ''")
        body = re.sub(r"\n{3,}", "\n\n", str(body)).strip()
        limit = self.config.max_text_chars
        if len(body) > limit:
            body = body[:limit] + f"\n\n[the page's text was cut at {limit:,} characters]"
        return body

    async def links(self, page: Page) -> str:
        found = await page.evaluate(_LINKS_JS)
        if not found:
            return "The page has no links."
        return "\n".join(f"- {link['text'] or '(no text)'}: {link['href']}" for link in found)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
