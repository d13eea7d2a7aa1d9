"""Trying a model call again: which failures pass, how long to wait, what a reader is told.

A rate limit (429), an overloaded or failing server (408, 409, 425, 5xx), a timeout and a
dropped or refused connection are transient: the call is made again after a wait that doubles
each time (full jitter, so many callers refused together do not come back together), or as long
as the provider's `Retry-After` / `retry-after-ms` asks, never longer than `max_delay_seconds`.
Everything else (a wrong key, an unknown model, a request the provider refuses, a used-up quota)
fails at once: trying again cannot help, and the error names what to fix.

Provider clients are built with `max_retries=0` (llm.models), so these tries are the only ones:
each is reported (`RetryNotice`) and a model slot is given back while they wait (llm.guard).
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any

from config import ModelCallsConfig

RETRIABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
# A 429 that says the account has no money or quota left will not pass by waiting.
_QUOTA_MARKERS = ("insufficient_quota", "quota exceeded", "billing", "exceeded your current quota")


@dataclass(frozen=True)
class RetryNotice:
    """One wait before trying a call again: `attempt` of `max_attempts` comes after `wait_seconds`."""

    model: str
    attempt: int
    max_attempts: int
    wait_seconds: float
    reason: str

    def event(self) -> dict[str, Any]:
        """The run's `custom` event (`llm_retry`), as clients show it ("retrying (2/5)…")."""
        return {
            "type": "llm_retry",
            "model": self.model,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "wait_seconds": round(self.wait_seconds, 3),
            "reason": self.reason,
        }


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a provider error carries (openai, anthropic and httpx errors all say so)."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same call again later may succeed."""
    status = status_of(exc)
    if status is not None:
        if status == 429 and any(m in str(exc).lower() for m in _QUOTA_MARKERS):
            return False
        return status in RETRIABLE_STATUS
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    # Connection and timeout errors of the HTTP clients underneath, by name: openai's
    # APIConnectionError / APITimeoutError, httpx's ConnectError / ReadTimeout / RemoteProtocolError.
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names
        & {
            "APIConnectionError",
            "APITimeoutError",
            "TransportError",
            "TimeoutException",
            "NetworkError",
            "RemoteProtocolError",
            "ClientConnectionError",
        }
    )


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the provider asked to wait (`retry-after-ms`, or `Retry-After` as seconds or a date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(float(millis) / 1000.0, 0.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def backoff(attempt: int, exc: BaseException, policy: ModelCallsConfig) -> float:
    """Seconds to wait after failed try number `attempt` (1-based) ended with `exc`."""
    asked = retry_after(exc)
    if asked is not None:
        return min(asked, policy.max_delay_seconds)
    ceiling = min(policy.initial_delay_seconds * (2.0 ** (attempt - 1)), policy.max_delay_seconds)
    # Full jitter, but never less than half: a burst refused together spreads out, and still waits.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def describe(exc: BaseException) -> str:
    """A short reason for a failed try, for the retry event and the log."""
    status = status_of(exc)
    detail = str(exc).splitlines()[0][:160] if str(exc) else ""
    name = type(exc).__name__
    if status is not None:
        return f"{status} {name}" + (f": {detail}" if detail else "")
    return f"{name}: {detail}" if detail else name
