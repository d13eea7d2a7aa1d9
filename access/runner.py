"""A role where the work happens: the runner asks, before each run, what the run's person may use.

`RunAccess.permissions(user_id)` reads the role afresh (one KV read: a role changed by an admin or
the identity provider holds from the next run, without restarts): a role assigned to the user id,
else admin for an admin token's user, else the platform's role for an unlinked chat user
(`<channel>:<id>`), else `access.default_role`. `check_run` refuses a forbidden model or custom agent
with a sentence saying so, and writes the run (or its refusal) to the audit trail (a started run's
record beside the run: the model is not kept waiting for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from access.audit import AuditLog
from access.policy import Permissions, permissions_for
from access.roles import RoleBook
from bus import Bus
from config import AppConfig


class Refused(Exception):
    """A run its person's role does not allow; `str()` says what and why."""


class RunAccess:
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config
        self.audit = AuditLog(bus)
        self._book: RoleBook | None = None
        self._admin_tokens = {t.user_id for t in config.gateway.tokens if t.admin}
        self._writing: set[asyncio.Task[None]] = set()  # audit records under way (kept till written)

    async def _roles(self) -> RoleBook:
        if self._book is None:
            self._book = await RoleBook.open(self.bus)
        return self._book

    async def role_of(self, user_id: str) -> str | None:
        assigned = await (await self._roles()).role_of(user_id)
        if assigned:
            return assigned
        if user_id in self._admin_tokens:
            return "admin"
        channel, sep, _ = user_id.partition(":")
        if sep and channel in self.config.access.channel_roles:
            return self.config.access.channel_roles[channel]
        return None

    async def permissions(self, user_id: str) -> Permissions:
        return permissions_for(self.config, await self.role_of(user_id))

    async def check_run(
        self,
        permissions: Permissions,
        *,
        user_id: str,
        run_id: str,
        thread_id: str,
        model: str | None,
        agent: str | None,
    ) -> None:
        """Raises Refused when the role may not use the run's model or custom agent."""
        reason = permissions.refusal_for_model(model) if model else None
        if reason is None and agent and not permissions.agent(agent):
            reason = f"agent: your role {permissions.role!r} may not use the custom agent {agent!r}"
        detail = {"role": permissions.role, "model": model, "agent": agent}
        if reason is not None:
            await self.audit.record(
                "run_refused",
                user_id=user_id,
                run_id=run_id,
                thread_id=thread_id,
                outcome="refused",
                detail={**detail, "reason": reason},
            )
            raise Refused(reason)
        # Written beside the run, not before it: a record that fails is logged, never the run's.
        record = self.audit.record(
            "run_started", user_id=user_id, run_id=run_id, thread_id=thread_id, detail=detail
        )
        started = asyncio.create_task(record)
        self._writing.add(started)
        started.add_done_callback(self._writing.discard)


# Offered whatever the role says: `tool_search` finds only the deferred tools the role offers, and
# without it a role allowing an MCP server's tools could not reach them when they are deferred.
ALWAYS_OFFERED = frozenset({"tool_search"})


def tool_filter(permissions: Permissions) -> Callable[[str, str | None, str | None], bool] | None:
    """Whether the role lets the model see a tool (by name, group and MCP server); None: every tool."""
    if permissions.every_tool:
        return None

    def offered(name: str, group: str | None, mcp_server: str | None = None) -> bool:
        return name in ALWAYS_OFFERED or permissions.tool(name, group, mcp_server)

    return offered
