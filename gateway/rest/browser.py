"""DeerFlow's browser control: `POST /api/threads/{id}/browser/navigate` steers the thread's page.

The page is the one the agent's browser tools use (the browser component's, `browser/`): the
process holding the thread's page is asked first, any browser process when none holds it. The
person's role's egress policy (`access.egress`) holds the page as it holds their runs'. The
answer names the page's latest screenshot (an artifact under outputs) for the live view. Off
(404, as DeerFlow) unless `browser.enabled`.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from access.egress import egress_policy
from bus.errors import NoResponders, RequestTimeout
from bus.messages.browser import BrowserReply, BrowserRequest, browser_thread_subject
from bus.service import ServiceError, call
from gateway.deps import GW, Me
from gateway.schemas import Body, errors

router = APIRouter()


class BrowserNavigate(Body):
    url: str = Field(description="The http(s) URL to open in the thread's browser page")


class BrowserNavigated(BaseModel):
    screenshot: str | None = Field(None, description="The artifact path of the page's latest screenshot")
    url: str
    title: str = ""


@router.post(
    "/threads/{thread_id}/browser/navigate",
    response_model=BrowserNavigated,
    responses=errors(400, 403, 404, 502, 503),
)
async def browser_navigate(gw: GW, me: Me, thread_id: str, body: BrowserNavigate) -> BrowserNavigated:
    """Open `url` in the thread's browser page (the agent's), and answer with its screenshot."""
    await gw.own_thread(thread_id, me)
    if not gw.config.browser.enabled:
        raise HTTPException(404, "the browser is not enabled (browser.enabled in config.yaml)")
    url = body.url.strip()
    if not url:
        raise HTTPException(400, "url is required")
    # The person's role's egress policy, as the runner gives their runs: the browser holds it.
    role = (await gw.run_access.permissions(me)).role
    request = BrowserRequest(
        user_id=me, thread_id=thread_id, action="navigate", url=url, egress=egress_policy(gw.config, role)
    )
    timeout = gw.config.browser.timeout_seconds * 2 + 5
    try:
        try:
            reply = await gw.bus.request(
                browser_thread_subject(gw.bus.subjects.prefix, me, thread_id), request, BrowserReply, timeout
            )
            if reply.error is not None:
                raise ServiceError(reply.error.message, reply.error.code)
        except NoResponders:
            reply = await call(gw.bus, "browser", "act", request, BrowserReply, timeout=timeout)
    except RequestTimeout:
        raise HTTPException(502, f"the browser did not answer within {timeout:g}s") from None
    except ServiceError as exc:
        if exc.code == "invalid":
            raise HTTPException(400, exc.message) from None
        if exc.code == "not_allowed":
            raise HTTPException(403, exc.message) from None
        if exc.code == "unavailable":
            raise HTTPException(503, "no browser process is running (`antler run browser`)") from None
        raise HTTPException(502, exc.message) from None
    return BrowserNavigated(screenshot=reply.frame, url=reply.url, title=reply.title)
