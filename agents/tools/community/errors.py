"""Why a web tool got no answer. The tools catch these and hand `str(error)` to the model.

WebToolError                      base; `provider` names the service that was asked
├── NotConfigured                 the tool's entry lacks something the provider needs (an API key)
├── ProviderUnreachable           (also ConnectionError) no connection to the provider
├── ProviderTimeout               (also TimeoutError) no full answer within timeout_seconds
├── ProviderRefused               the provider answered with an HTTP error (`status`, `detail`)
├── BadProviderResponse           (also ValueError) the answer is not what the provider's API documents
├── FetchRefused                  web_fetch will not fetch this URL (scheme, private address, redirects)
└── EgressRefused                 the run's egress policy refuses the provider's host (`host`, `reason`)
"""

from __future__ import annotations


class WebToolError(Exception):
    """Base of the web tools' errors; the message is written for the model to act on."""

    def __init__(self, provider: str, message: str) -> None:
        self.provider = provider
        super().__init__(message)


class NotConfigured(WebToolError):
    def __init__(self, provider: str, missing: str) -> None:
        self.missing = missing
        super().__init__(provider, f"the tool is not set up for {provider}: {missing}; tell the user")


class ProviderUnreachable(WebToolError, ConnectionError):
    def __init__(self, provider: str, host: str, detail: str) -> None:
        self.host = host
        self.detail = detail
        super().__init__(provider, f"cannot reach {provider} at {host} ({detail}); try again later")


class ProviderTimeout(WebToolError, TimeoutError):
    def __init__(self, provider: str, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        super().__init__(
            provider,
            f"{provider} did not answer within {timeout_seconds:g}s; try again later or another source",
        )


class ProviderRefused(WebToolError):
    def __init__(self, provider: str, status: int, detail: str, hint: str = "") -> None:
        self.status = status
        self.detail = detail
        message = f"{provider} answered HTTP {status}"
        if detail:
            message += f": {detail}"
        if hint:
            message += f" ({hint})"
        super().__init__(provider, message)


class BadProviderResponse(WebToolError, ValueError):
    def __init__(self, provider: str, detail: str) -> None:
        self.detail = detail
        super().__init__(provider, f"{provider} sent an answer that cannot be read: {detail}")


class FetchRefused(WebToolError):
    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__("http", f"will not fetch {url}: {reason}")


class EgressRefused(WebToolError):
    """The run's egress policy (`access.egress`) does not let the tool reach `host`."""

    def __init__(self, provider: str, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(provider, f"will not ask {provider} ({host}): {reason}")
