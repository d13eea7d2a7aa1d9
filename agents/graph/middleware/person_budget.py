"""PersonBudgetMiddleware: a person's own budget (tokens and cost per day and month, their role's
`budget`), checked before each model call of their run and counted after it (access.usage).

A person who has used a limit up gets an answer saying which limit and when it resets, in place of
the model's (the run ends normally, nothing else is touched), and a `budget_refused` audit record.
Every call is counted, budget or not, so `/usage` and `GET /api/usage` show what each person used.

What is counted is every model call made inside the middleware: the answer, and the calls other
links make on the person's behalf (the summary of older messages, the thread's title, an empty
answer asked again). A LangChain callback registered once (`register_configure_hook`, inheritable)
hears each call that starts while `PersonMeter.counting` holds its context; `/compact` in the threads
service counts its summary the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

from access.runner import RunAccess
from access.usage import UsageBook, call_cost
from bus import Bus
from config import AppConfig

log = logging.getLogger(__name__)


class _Calls(BaseCallbackHandler):
    """The model calls made while it is the context's: each one's model and tokens in and out."""

    run_inline = True  # a list append: no thread for it

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, int, int, int]] = []

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                usage = message.usage_metadata if isinstance(message, AIMessage) else None
                if not usage:
                    continue
                model = message.response_metadata.get("model_name") if message is not None else None
                tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
                total = int(usage.get("total_tokens", 0)) or tokens_in + tokens_out
                self.calls.append((model if isinstance(model, str) else None, tokens_in, tokens_out, total))


_counting: ContextVar[_Calls | None] = ContextVar("antler_person_calls", default=None)
register_configure_hook(_counting, inheritable=True)  # once per process: every call made meanwhile


class PersonMeter:
    """A person's budget: `refusal` before their model calls, `counting` around them."""

    def __init__(self, bus: Bus, config: AppConfig, model_name: str | None) -> None:
        """`model_name`: the configured model a call goes to when its answer does not name one (its
        prices make the cost)."""
        self.bus = bus
        self.config = config
        self.model_name = model_name
        self.access = RunAccess(bus, config)
        self._book: UsageBook | None = None
        self._pending: set[asyncio.Task[None]] = set()  # counts written after the answer went on
        # No role with a budget (the default): nothing to check, and the count need not hold the answer.
        self.limited = any(role.budget.limited for role in config.access.roles.values())

    async def _usage(self) -> UsageBook:
        if self._book is None:
            self._book = await UsageBook.open(self.bus)
        return self._book

    async def refusal(self, user_id: str, run_id: str | None, thread_id: str | None) -> str | None:
        """Why the person may make no model call now (audited `budget_refused`); None: they may."""
        if not self.limited:
            return None
        permissions = await self.access.permissions(user_id)
        reason = await (await self._usage()).refusal(user_id, permissions.role, permissions.config.budget)
        if reason is not None:
            log.info("run %s: %s is over budget", run_id, user_id)
            await self.access.audit.record(
                "budget_refused",
                user_id=user_id,
                run_id=run_id,
                thread_id=thread_id,
                outcome="refused",
                detail={"role": permissions.role, "reason": reason},
            )
        return reason

    @contextlib.asynccontextmanager
    async def counting(self, user_id: str) -> AsyncIterator[None]:
        """Count every model call made inside against `user_id` (when the block ends, also on error:
        a call that answered cost its tokens)."""
        calls = _Calls()
        token = _counting.set(calls)
        try:
            yield
        finally:
            _counting.reset(token)
            if calls.calls:
                counted = self._count(user_id, calls)
                if self.limited:
                    await counted  # the next call's check must see it
                else:
                    task = asyncio.create_task(counted)
                    self._pending.add(task)
                    task.add_done_callback(self._pending.discard)

    def _configured(self, provider_model: str | None) -> str | None:
        """The configured model (its name) an answer's model id is, else the one this meter was for."""
        if provider_model:
            for model in self.config.models:
                if provider_model in (model.model, model.name):
                    return model.name
        return self.model_name

    async def _count(self, user_id: str, calls: _Calls) -> None:
        tokens = sum(total for _, _, _, total in calls.calls)
        cost = sum(call_cost(self.config, self._configured(m), i, o) for m, i, o, _ in calls.calls)
        try:
            await (await self._usage()).add(user_id, tokens, cost)
        except Exception as exc:  # counting must never cost the answer
            log.warning("could not count %d tokens of %s: %s", tokens, user_id, exc)


class PersonBudgetMiddleware(AgentMiddleware):
    """Outermost of the model call's links, so what the others call on the person's behalf counts."""

    def __init__(self, bus: Bus, config: AppConfig, model_name: str | None) -> None:
        super().__init__()
        self.meter = PersonMeter(bus, config, model_name)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        context = getattr(request.runtime, "context", None)
        user_id = getattr(context, "user_id", None)
        if not isinstance(user_id, str) or not user_id:
            return await handler(request)
        run_id, thread_id = getattr(context, "run_id", None), getattr(context, "thread_id", None)
        reason = await self.meter.refusal(user_id, run_id, thread_id)
        if reason is not None:
            return AIMessage(content=reason)
        async with self.meter.counting(user_id):
            return await handler(request)
