"""`/models`: the configured models, the chat's marked; `/models <name>`: the chat uses that one, if
the person's role allows it (access.policy)."""

from __future__ import annotations

from access.runner import RunAccess
from bus.messages import InboundMessage
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    names = [m.name for m in ctx.config.models]
    if not argument:
        binding = await ctx.bindings.of(message)
        current = binding.model_name or (names[0] if names else None)
        lines = [f"{'* ' if n == current else '  '}{n}" for n in names] or ["no models are configured"]
        return "Models (choose with /models <name>):\n" + "\n".join(lines)
    if argument not in names:
        return f"There is no model {argument!r}. Available: {', '.join(names) or 'none'}"
    permissions = await RunAccess(ctx.bus, ctx.config).permissions(await ctx.bindings.person(message))
    if (reason := permissions.refusal_for_model(argument)) is not None:
        text = reason.removeprefix("model: ")
        return text[:1].upper() + text[1:]
    binding = await ctx.bindings.of(message)
    await ctx.bindings.choose_model(message, binding, argument)
    return f"This chat now uses {argument}."
