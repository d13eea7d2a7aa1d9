"""PersonBudgetMiddleware: a person's own budget (tokens and cost per day and month, their role's
`budget`), checked before each model call of their run and counted after it (access.usage).

A person who has used a limit up gets an answer saying which limit and when it resets, in place of
the model's (the run ends normally, nothing else is touched), and a `budget_refused` audit record.
Every call is counted, budget or not, so `/usage` and `GET /api/usage` show what each person used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage

from access.runner import RunAccess
from access.usage import UsageBook, call_cost
from agents.graph.middleware._util import last_ai
from bus import Bus
from config import AppConfig

log = logging.getLogger(__name__)


class PersonBudgetMiddleware(AgentMiddleware):
    def __init__(self, bus: Bus, config: AppConfig, model_name: str | None) -> None:
        """`model_name`: the configured model the calls go to (its prices make the cost)."""
        super().__init__()
        self.bus = bus
        self.config = config
        self.model_name = model_name
        self.access = RunAccess(bus, config)
        self._book: UsageBook | None = None
        self._counting: set[asyncio.Task[None]] = set()  # counts written after the answer went on

    async def _usage(self) -> UsageBook:
        if self._book is None:
            self._book = await UsageBook.open(self.bus)
        return self._book

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        context = getattr(request.runtime, "context", None)
        user_id = getattr(context, "user_id", None)
        if not isinstance(user_id, str) or not user_id:
            return await handler(request)
        book = await self._usage()
        # No role with a budget (the default): nothing to check, and the count need not hold the answer.
        limited = any(role.budget.limited for role in self.config.access.roles.values())
        permissions = await self.access.permissions(user_id) if limited else None
        reason = (
            await book.refusal(user_id, permissions.role, permissions.config.budget) if permissions else None
        )
        if reason is not None and permissions is not None:
            log.info("run %s: %s is over budget", getattr(context, "run_id", None), user_id)
            await self.access.audit.record(
                "budget_refused",
                user_id=user_id,
                run_id=getattr(context, "run_id", None),
                thread_id=getattr(context, "thread_id", None),
                outcome="refused",
                detail={"role": permissions.role, "reason": reason},
            )
            return AIMessage(content=reason)
        result = await handler(request)
        answer = last_ai(result)
        usage: Mapping[str, Any] = (answer.usage_metadata if answer is not None else None) or {}
        tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        total = int(usage.get("total_tokens", 0)) or tokens_in + tokens_out
        counted = self._count(
            book, user_id, total, call_cost(self.config, self.model_name, tokens_in, tokens_out)
        )
        if limited:
            await counted  # the next call's check must see it
        else:
            task = asyncio.create_task(counted)
            self._counting.add(task)
            task.add_done_callback(self._counting.discard)
        return result

    @staticmethod
    async def _count(book: UsageBook, user_id: str, tokens: int, cost: float) -> None:
        try:
            await book.add(user_id, tokens, cost)
        except Exception as exc:  # counting must never cost the answer
            log.warning("could not count %d tokens of %s: %s", tokens, user_id, exc)
