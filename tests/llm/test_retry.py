"""Which model failures are tried again, and how long the waits are."""

from __future__ import annotations

import email.utils

import httpx
import openai
import pytest

from config import ModelCallsConfig
from llm.retry import backoff, is_transient, retry_after


def status_error(
    status: int, message: str = "busy", headers: dict[str, str] | None = None
) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://model/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    cls = {429: openai.RateLimitError, 401: openai.AuthenticationError, 400: openai.BadRequestError}.get(
        status, openai.InternalServerError
    )
    return cls(message, response=response, body=None)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        pytest.param(status_error(429), True, id="rate-limit"),
        pytest.param(status_error(503), True, id="unavailable"),
        pytest.param(status_error(429, "You exceeded your current quota"), False, id="quota-used-up"),
        pytest.param(status_error(401), False, id="wrong-key"),
        pytest.param(status_error(400), False, id="bad-request"),
        pytest.param(
            openai.APIConnectionError(request=httpx.Request("POST", "http://m")), True, id="connection"
        ),
        pytest.param(TimeoutError(), True, id="timeout"),
        pytest.param(ValueError("bad json"), False, id="our-bug"),
    ],
)
def test_only_failures_that_may_pass_are_tried_again(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_retry_after_is_read_as_seconds_milliseconds_or_a_date() -> None:
    assert retry_after(status_error(429, headers={"retry-after": "7"})) == 7.0
    assert retry_after(status_error(429, headers={"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after(status_error(429, headers={"retry-after": date}), now=1_000_000.0) == 30.0
    assert retry_after(status_error(429)) is None


def test_waits_double_with_jitter_and_a_provider_asking_longer_is_capped() -> None:
    policy = ModelCallsConfig(initial_delay_seconds=1.0, max_delay_seconds=10.0)
    plain = status_error(503)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 10.0)]:
        wait = backoff(attempt, plain, policy)
        assert ceiling / 2 <= wait <= ceiling
    assert backoff(1, status_error(429, headers={"retry-after": "3"}), policy) == 3.0
    assert backoff(1, status_error(429, headers={"retry-after": "600"}), policy) == 10.0
