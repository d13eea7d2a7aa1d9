"""Web tools for the agent, each built from its config.yaml `tools[]` entry.

    tools:
      - {name: web_search, use: "agents.tools.community.web_search:make_web_search", provider: tavily}
      - {name: web_fetch, use: "agents.tools.community.web_fetch:make_web_fetch", provider: http}
      - {name: image_search, use: "agents.tools.community.image_search:make_image_search",
         provider: searxng, base_url: "http://localhost:8888"}

Every tool answers in text; when a provider fails (time-out, HTTP error, bad
answer) the text starts with "Error:" and says what the model can do.
"""

from agents.tools.community.errors import (
    BadProviderResponse,
    EgressRefused,
    FetchRefused,
    NotConfigured,
    ProviderRefused,
    ProviderTimeout,
    ProviderUnreachable,
    WebToolError,
)
from agents.tools.community.image_search import make_image_search
from agents.tools.community.web_fetch import make_web_fetch
from agents.tools.community.web_search import make_web_search

__all__ = [
    "BadProviderResponse",
    "EgressRefused",
    "FetchRefused",
    "NotConfigured",
    "ProviderRefused",
    "ProviderTimeout",
    "ProviderUnreachable",
    "WebToolError",
    "make_image_search",
    "make_web_fetch",
    "make_web_search",
]
