"""The agent's browser: `browser_*` tools on the thread's page and `web_capture`, in DeerFlow's names.

Each tool is a request to the browser component (`browser/`) for the run's user and thread. The
page of a thread lives in one browser process, which listens on the thread's own subject while
it holds it; a tool asks there first, and `navigate` or `web_capture` go to any browser process
when nobody holds the thread. A browser process that died took its pages along: the tool says so
and the model navigates again. Given only when `browser.enabled`.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.types import Command

from agents.tools.decorator import tool
from bus import Bus
from bus.errors import NoResponders, RequestTimeout
from bus.messages.browser import OPENING_ACTIONS, BrowserReply, BrowserRequest, browser_thread_subject
from bus.service import ServiceError, call
from config import AppConfig

BROWSER_TOOLS = (
    "browser_navigate",
    "browser_snapshot",
    "browser_click",
    "browser_type",
    "browser_scroll",
    "browser_get_text",
    "browser_get_links",
    "browser_back",
    "browser_screenshot",
    "browser_close",
    "web_capture",
)

_LOST = (
    "The browser holding this thread's page stopped (or closed it), so the page is gone. "
    "Open it again with browser_navigate."
)
_NOT_RUNNING = "the browser is not running (browser.enabled in config.yaml, `antler run browser`)"


class BrowserUnavailable(ToolException):
    pass


def make_browser_tools(bus: Bus, config: AppConfig) -> list[BaseTool]:
    """The tools, bound to one bus connection (none when the browser is not enabled)."""
    timeout = config.browser.timeout_seconds * 2 + 5  # a page load, then the snapshot and frame

    async def ask(runtime: ToolRuntime[Any, Any], **fields: Any) -> BrowserReply:
        context = runtime.context
        request = BrowserRequest(
            user_id=getattr(context, "user_id", "default"),
            thread_id=getattr(context, "thread_id", ""),
            run_id=getattr(context, "run_id", None),
            egress=getattr(context, "egress", None),  # the run's (access.egress), enforced by the browser
            **fields,
        )
        subject = browser_thread_subject(bus.subjects.prefix, request.user_id, request.thread_id)
        try:
            if request.action != "capture":
                try:
                    reply = await bus.request(subject, request, BrowserReply, timeout=timeout)
                except NoResponders:
                    if request.action not in OPENING_ACTIONS:
                        if request.action == "close":
                            return BrowserReply(text="No browser page was open.")
                        raise ToolException(_LOST) from None
                else:
                    if reply.error is not None:
                        raise ServiceError(reply.error.message, reply.error.code)
                    return reply
            return await call(
                bus, "browser", "act", request, BrowserReply, timeout=timeout, unavailable=_NOT_RUNNING
            )
        except RequestTimeout:
            raise ToolException(f"Error: the browser did not answer within {timeout:g}s") from None
        except ServiceError as exc:
            if exc.code == "not_found":
                raise ToolException(_LOST) from None
            raise ToolException(f"Error ({exc.code}): {exc.message}") from None

    def shown(reply: BrowserReply, tool_call_id: str) -> Command[Any]:
        """The snapshot for the model; the latest frame on the message for UIs showing the page."""
        extra = {"browser_view": {"screenshot": reply.frame, "url": reply.url, "title": reply.title}}
        message = ToolMessage(
            reply.text, tool_call_id=tool_call_id, additional_kwargs=extra if reply.frame else {}
        )
        return Command(update={"messages": [message]})

    @tool
    async def browser_navigate(url: str, runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """Open a URL in this conversation's browser and list the page's interactive elements.

        Unlike web_fetch (read only), the page stays open: click and type on it next, by the
        [ref] numbers listed. Cookies and logins last for this conversation. Include the scheme
        (https://). Only public addresses can be opened.

        Args:
            url: The http(s) URL to open.
        """
        return shown(await ask(runtime, action="navigate", url=url.strip()), runtime.tool_call_id or "")

    @tool
    async def browser_snapshot(runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """List the current page's interactive elements again (after the page changed by itself)."""
        return shown(await ask(runtime, action="snapshot"), runtime.tool_call_id or "")

    @tool
    async def browser_click(ref: int, runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """Click an element by its [ref] number from the latest snapshot; returns the page after it.

        Args:
            ref: The element's number.
        """
        return shown(await ask(runtime, action="click", ref=ref), runtime.tool_call_id or "")

    @tool
    async def browser_type(
        ref: int, text: str, runtime: ToolRuntime[Any, Any], submit: bool = False
    ) -> Command[Any]:
        """Type text into an input or text area by its [ref] number (replacing what it held).

        Args:
            ref: The field's number from the latest snapshot.
            text: The text to enter.
            submit: Press Enter afterwards (to search or send a form).
        """
        reply = await ask(runtime, action="type", ref=ref, text=text, submit=submit)
        return shown(reply, runtime.tool_call_id or "")

    @tool
    async def browser_scroll(
        runtime: ToolRuntime[Any, Any], direction: Literal["down", "up"] = "down"
    ) -> Command[Any]:
        """Scroll the page by most of a screen, down or up, and list what is visible then.

        Args:
            direction: "down" or "up".
        """
        return shown(await ask(runtime, action="scroll", direction=direction), runtime.tool_call_id or "")

    @tool
    async def browser_get_text(runtime: ToolRuntime[Any, Any]) -> str:
        """Read the visible text of the current page (long pages are cut), to quote or summarize it."""
        reply = await ask(runtime, action="text")
        return f"URL: {reply.url}\nTitle: {reply.title}\n\n{reply.text}"

    @tool
    async def browser_get_links(runtime: ToolRuntime[Any, Any]) -> str:
        """List the current page's links (text and address)."""
        return (await ask(runtime, action="links")).text

    @tool
    async def browser_back(runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """Go back to the previous page in this conversation's browser."""
        return shown(await ask(runtime, action="back"), runtime.tool_call_id or "")

    @tool
    async def browser_screenshot(
        runtime: ToolRuntime[Any, Any], filename: str | None = None, full_page: bool = False
    ) -> str:
        """Save a screenshot of the current page (as it is after your clicks and typing) to the outputs.

        Call present_files with the path it returns to give it to the user.

        Args:
            filename: The file's name (saved as .png under /mnt/user-data/outputs).
            full_page: The whole scrollable page instead of the visible part.
        """
        reply = await ask(runtime, action="screenshot", filename=filename, full_page=full_page)
        return f"Saved the screenshot to {reply.saved}"

    @tool
    async def browser_close(runtime: ToolRuntime[Any, Any]) -> str:
        """Close this conversation's browser page (its cookies go too); browser_navigate opens a new one."""
        return (await ask(runtime, action="close")).text

    @tool
    async def web_capture(
        url: str,
        runtime: ToolRuntime[Any, Any],
        filename: str | None = None,
        full_page: bool = True,
        output_format: Literal["png", "jpeg", "pdf"] = "png",
    ) -> str:
        """Capture a web page as rendered by a browser (a fresh page, no cookies) into the outputs.

        For a visual record of a public page (JavaScript-heavy pages, dashboards, evidence for a
        report). Call present_files with the path it returns to give it to the user.

        Args:
            url: The http(s) URL to capture.
            filename: The file's name (its extension follows output_format).
            full_page: The whole scrollable page (images only).
            output_format: png, jpeg or pdf.
        """
        reply = await ask(
            runtime,
            action="capture",
            url=url.strip(),
            filename=filename,
            full_page=full_page,
            format=output_format,
        )
        return f"Captured {reply.url} ({reply.title}) to {reply.saved}"

    if not config.browser.enabled:
        return []
    return [
        browser_navigate,
        browser_snapshot,
        browser_click,
        browser_type,
        browser_scroll,
        browser_get_text,
        browser_get_links,
        browser_back,
        browser_screenshot,
        browser_close,
        web_capture,
    ]
