"""`/usage`: what this person (the linked account, else the chat user) used today and this month,
against their role's budget (access.usage)."""

from __future__ import annotations

from access.runner import RunAccess
from access.usage import UsageBook, usage_text
from bus.messages import InboundMessage
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    person = await ctx.bindings.person(message)
    permissions = await RunAccess(ctx.bus, ctx.config).permissions(person)
    uses = await (await UsageBook.open(ctx.bus)).usage(person, permissions.config.budget)
    return usage_text(permissions.role, uses)
