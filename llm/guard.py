"""Every model call of a process goes through here: its model's cluster budget, then retries.

    calls = ModelCalls(bus, config)       # one per component process; `await calls.start()`
    answer = await calls.call("gpt-4o", lambda: model.ainvoke(prompt), on_retry=tell_the_user)

A call takes a slot of its model's budget (`models[].max_concurrent_calls`, llm.budget) for each
try and gives it back while it waits to try again, so a model refusing with 429s is not also
held busy by the calls it refused. Transient failures are tried again as `llm.retry` says; each
wait is reported to `on_retry` (the agent turns it into an `llm_retry` run event) and logged.
After the last try the failure is raised as `ModelCallFailed`, naming the model, the tries and
the reason; other failures are raised unchanged at once.

Without a bus (`ModelCalls(None, config)`), calls are retried but no budget is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bus import Bus
from config import AppConfig
from llm.budget import ModelSlots
from llm.errors import ModelCallFailed
from llm.retry import RetryNotice, backoff, describe, is_transient
from llm.telemetry import count_tokens, measured

log = logging.getLogger(__name__)

T = TypeVar("T")
OnRetry = Callable[[RetryNotice], Awaitable[None] | None]


class ModelCalls:
    """One process's model calls: budgets shared through the bus and the retry policy."""

    def __init__(self, bus: Bus | None, config: AppConfig) -> None:
        self.bus = bus  # per-person budgets (agents.graph.middleware.person_budget) count on it too
        self.config = config
        self.policy = config.model_calls
        limited = any(
            m.max_concurrent_calls or m.requests_per_minute or m.tokens_per_minute for m in config.models
        )
        self.slots = ModelSlots(bus, self.policy.lease_seconds) if bus is not None and limited else None

    async def start(self) -> None:
        if self.slots is not None:
            await self.slots.start()

    async def close(self) -> None:
        if self.slots is not None:
            await self.slots.close()

    async def call(
        self,
        model_name: str | None,
        attempt: Callable[[], Awaitable[T]],
        *,
        on_retry: OnRetry | None = None,
        label: str | None = None,
        tokens: Callable[[T], int] | None = None,
    ) -> T:
        """`await attempt()` within the model's budget, tried again on transient failures.

        Args:
            model_name: the configured model (None: the default); its budget applies.
            attempt: makes one try of the call (a new request each time).
            on_retry: told of each wait before another try.
            label: the model as users know it, for notices and the final error.
            tokens: the tokens a result used (counted against `tokens_per_minute`).

        Raises:
            ModelCallFailed: the last try failed transiently (its cause attached).
            Exception: a failure that trying again cannot mend, as the provider raised it.
        """
        model = self.config.get_model(model_name)
        name = model.name if model is not None else (model_name or "model")
        shown = label or (model.display_name or model.name if model is not None else name)
        with measured(name) as timing:
            result = await self._tries(model, name, shown, attempt, on_retry, tokens)
            count_tokens(timing, result)
        return result

    async def _tries(
        self,
        model: Any,
        name: str,
        shown: str,
        attempt: Callable[[], Awaitable[T]],
        on_retry: OnRetry | None,
        tokens: Callable[[T], int] | None,
    ) -> T:
        tries = self.policy.max_attempts
        for number in range(1, tries + 1):
            try:
                result = await self._once(model, attempt, tokens)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _bubble_up(exc) or not is_transient(exc):
                    raise
                if number == tries:
                    log.warning("model %s failed %d times; giving up: %s", name, tries, describe(exc))
                    raise ModelCallFailed(shown, tries, exc) from exc
                wait = backoff(number, exc, self.policy)
                notice = RetryNotice(shown, number + 1, tries, wait, describe(exc))
                log.info(
                    "model %s: try %d of %d failed (%s); again in %.2fs",
                    name,
                    number,
                    tries,
                    notice.reason,
                    wait,
                )
                if on_retry is not None:
                    try:
                        told = on_retry(notice)
                        if told is not None:
                            await told
                    except Exception as report_error:  # telling must never cost the call
                        log.warning("could not report a model retry: %s", report_error)
                await asyncio.sleep(wait)
            else:
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _once(self, model: Any, attempt: Callable[[], Awaitable[T]], tokens: Any) -> T:
        if self.slots is None or model is None:
            return await attempt()
        if model.requests_per_minute or model.tokens_per_minute:
            await self.slots.admit(model.name, model.requests_per_minute, model.tokens_per_minute)
        lease = None
        if model.max_concurrent_calls:
            lease = await self.slots.acquire(model.name, model.max_concurrent_calls)
        try:
            result = await attempt()
        finally:
            if lease is not None:
                await asyncio.shield(self.slots.release(lease))
        if model.tokens_per_minute and tokens is not None:
            await self.slots.spent(model.name, tokens(result))
        return result


def _bubble_up(exc: BaseException) -> bool:
    """LangGraph's control flow (an interrupt, a command), which is no failure of the model."""
    return any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__)
