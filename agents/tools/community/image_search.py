"""`image_search`: images for a query (title, image URL, thumbnail, source page), from DuckDuckGo
(no key), a SearXNG instance or Tavily.

config.yaml:

    tools:
      - name: image_search
        use: agents.tools.community.image_search:make_image_search
        # provider unset = duckduckgo, through the ddgs library (see agents/tools/community/_ddgs.py)
        provider: searxng           # or tavily (api_key)
        base_url: http://localhost:8888
        max_results: 5

A run asking the same query twice gets the first answer again (agents.tools.community._cache).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal, Self

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, model_validator

from agents.tools.community import _ddgs, _searxng, _tavily
from agents.tools.community._cache import RunCache
from agents.tools.community._common import (
    call_settings,
    check_settings,
    clip,
    first,
    guarded,
    run_egress,
    run_id,
)
from agents.tools.from_config import tool_factory
from bus.messages import EgressPolicy
from config import ToolConfig

logger = logging.getLogger(__name__)


class ImageSearchSettings(_ddgs.DdgsSettings):
    provider: Literal["duckduckgo", "searxng", "tavily"] = "duckduckgo"
    max_results: int = Field(5, ge=1, le=20)

    @model_validator(mode="after")
    def _searxng_needs_its_address(self) -> Self:
        if self.provider == "searxng" and not self.base_url:
            raise ValueError("provider searxng needs base_url, the address of a SearXNG instance")
        return self


class ImageSearchArgs(BaseModel):
    query: str = Field(description="What the images should show, in a few words.")


@dataclass(frozen=True)
class ImageHit:
    title: str
    image_url: str
    thumbnail_url: str
    page_url: str  # the page the image is on; '' when the provider does not say


def _absolute(url: str) -> str:
    """A protocol-relative `//host/x` as https; anything that is not http(s) as ''."""
    if url.startswith("//"):
        url = "https:" + url
    return url if url.startswith(("http://", "https://")) else ""


async def find_images(
    settings: ImageSearchSettings,
    query: str,
    egress: EgressPolicy | None = None,
    where: str = "image_search",
) -> list[ImageHit]:
    """The provider's images for `query`, at most `max_results`, if the run's `egress` policy
    (`access.egress`) lets the provider be asked.

    Raises:
        EgressRefused: the policy refuses the provider's host (the query is sent nowhere).
        WebToolError: the provider failed.
    """
    hits: list[ImageHit] = []
    if settings.provider == "duckduckgo":
        found = await _ddgs.search(
            settings, query, settings.max_results, "images", egress=egress, where=where, run_id=run_id()
        )
        for item in found:
            image = _absolute(first(item, "image"))
            if image:
                thumbnail = _absolute(first(item, "thumbnail")) or image
                title = clip(first(item, "title"), 200) or "(untitled)"
                hits.append(ImageHit(title, image, thumbnail, _absolute(first(item, "url"))))
    elif settings.provider == "searxng":
        for item in await _searxng.search(settings, query, "images", egress):
            image = _absolute(first(item, "img_src"))
            if image:
                thumbnail = _absolute(first(item, "thumbnail_src")) or image
                title = clip(first(item, "title", "content"), 200) or "(untitled)"
                hits.append(ImageHit(title, image, thumbnail, _absolute(first(item, "url"))))
    else:
        data = await _tavily.search(settings, query, settings.max_results, images=True, egress=egress)
        images = data.get("images")
        for item in images if isinstance(images, list) else []:
            entry = {"url": item} if isinstance(item, str) else item
            image = _absolute(first(entry, "url")) if isinstance(entry, dict) else ""
            if image:
                title = clip(first(entry, "description"), 200) or "(no description)"
                hits.append(ImageHit(title, image, image, ""))
    return hits[: settings.max_results]


def render(query: str, hits: list[ImageHit]) -> str:
    if not hits:
        return f'No images found for "{query}". Try other words.'
    lines = [f'Image results for "{query}":']
    for number, hit in enumerate(hits, 1):
        lines += [
            "",
            f"{number}. {hit.title}",
            f"   Image: {hit.image_url}",
            f"   Thumbnail: {hit.thumbnail_url}",
        ]
        if hit.page_url:
            lines.append(f"   Page: {hit.page_url}")
    return "\n".join(lines)


@tool_factory
def make_image_search(entry: ToolConfig) -> BaseTool:
    """The image search tool named `entry.name`, configured by the entry's extra keys."""
    settings = check_settings(entry, ImageSearchSettings)
    cache = RunCache()

    async def search_images(query: str) -> str:
        query = query.strip()
        if not query:
            return "Error: the query is empty; say what the images should show."

        async def work() -> str:
            current = call_settings(entry, ImageSearchSettings)
            hits = await find_images(current, query, run_egress(), entry.name)
            logger.info("%s: %s gave %d image(s)", entry.name, current.provider, len(hits))
            return render(query, hits)

        return await cache.get_or_make(" ".join(query.split()).lower(), lambda: guarded(entry.name, work))

    return StructuredTool.from_function(
        coroutine=search_images,
        name=entry.name,
        description=(
            f"Search the web for images. Returns up to {settings.max_results} images, each with a "
            "title, the image URL, a thumbnail URL and, when known, the page it is on. Use it to find "
            "pictures to show the user or reference images; cite the page when you use one."
        ),
        args_schema=ImageSearchArgs,
    )
