"""`web_fetch`: a web page as readable Markdown, fetched directly or through Jina Reader or Firecrawl.

config.yaml:

    tools:
      - name: web_fetch
        use: agents.tools.community.web_fetch:make_web_fetch
        provider: http              # or jina (api_key optional), firecrawl (api_key)
        max_chars: 4096
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from access.addresses import literal_address, refusal_reason
from agents.tools.community import _direct, _readers
from agents.tools.community._common import (
    ToolSettings,
    call_settings,
    cap,
    check_settings,
    guarded,
    run_egress,
)
from agents.tools.community._html import describe, html_to_markdown
from agents.tools.community.errors import FetchRefused
from agents.tools.from_config import tool_factory
from bus.messages import EgressPolicy
from config import ToolConfig

logger = logging.getLogger(__name__)


class WebFetchSettings(ToolSettings):
    provider: Literal["http", "jina", "firecrawl"] = "http"
    timeout_seconds: float = Field(20.0, gt=0)
    max_chars: int = Field(4096, ge=256, description="Longer pages are cut, with a line saying so.")
    max_bytes: int = Field(5_000_000, ge=1024, description="http: most bytes of a page read.")
    allow_private_networks: bool = Field(
        False, description="http: also fetch loopback, private and link-local addresses."
    )
    allowed_domains: list[str] | None = Field(
        None,
        description="Only these hosts and their subdomains may be fetched (every redirect too); "
        "unset: any public host.",
    )


class WebFetchArgs(BaseModel):
    url: str = Field(description="The page's full URL, starting with http:// or https://.")


async def read_page(settings: WebFetchSettings, url: str, egress: EgressPolicy | None = None) -> str:
    """The page at `url` as Markdown (or what it is, when it is not text), cut to `max_chars`; the
    run's `egress` policy (`access.egress`) decides which hosts may be read, as for its commands."""
    target = _direct.web_url(url)  # every provider gets an absolute http(s) URL
    _direct.check_domain(url, target.host, settings.allowed_domains, egress)
    if settings.provider != "http" and not settings.allow_private_networks:
        # A reader service resolves the name itself; a literal private or metadata address (or
        # localhost) is still refused here, as a self-hosted reader would reach it.
        literal = literal_address(target.host)
        reason = refusal_reason(literal) if literal is not None else None
        if reason is not None or target.host.rstrip(".").lower().endswith("localhost"):
            raise FetchRefused(
                url, f"{target.host} is a private or local address; only public pages can be read"
            )
    if settings.provider == "jina":
        text = await _readers.jina(settings, url, egress)
    elif settings.provider == "firecrawl":
        text = await _readers.firecrawl(settings, url, egress)
    else:
        text = await _read_directly(settings, url, egress)
    return cap(text, settings.max_chars) if text.strip() else f"{url} has no readable text."


async def _read_directly(settings: WebFetchSettings, url: str, egress: EgressPolicy | None) -> str:
    page = await _direct.fetch(
        url,
        timeout_seconds=settings.timeout_seconds,
        max_bytes=settings.max_bytes,
        allow_private_networks=settings.allow_private_networks,
        allowed_domains=settings.allowed_domains,
        egress=egress,
    )
    if page.kind == "binary":
        return describe(page.url, page.mime, page.size)
    notes = []
    if page.redirected:
        notes.append(f"(redirected to {page.url})")
    if page.truncated:
        notes.append(f"(only the first {settings.max_bytes:,} bytes of the page were read)")
    if page.kind == "html":
        title, text = await asyncio.to_thread(html_to_markdown, page.body, page.charset, page.url)
        if title:
            notes.insert(0, f"# {title}")
    else:
        text = page.body.decode(page.charset or "utf-8", errors="replace").strip()
    return "\n\n".join([*notes, text]) if notes else text


@tool_factory
def make_web_fetch(entry: ToolConfig) -> BaseTool:
    """The page-reading tool named `entry.name`, configured by the entry's extra keys."""
    settings = check_settings(entry, WebFetchSettings)

    async def fetch(url: str) -> str:
        url = url.strip()

        async def work() -> str:
            current = call_settings(entry, WebFetchSettings)
            text = await read_page(current, url, run_egress())
            logger.info("%s: %s read %d characters", entry.name, current.provider, len(text))
            return text

        return await guarded(entry.name, work)

    return StructuredTool.from_function(
        coroutine=fetch,
        name=entry.name,
        description=(
            "Read a web page: its main text as Markdown, at most "
            f"{settings.max_chars:,} characters. Only fetch exact URLs the user gave or that came from "
            "search results or earlier pages; include the scheme (https://). Pages behind a login "
            "cannot be read. PDFs, images and other files are described, not shown."
        ),
        args_schema=WebFetchArgs,
    )
