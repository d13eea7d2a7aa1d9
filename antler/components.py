"""The components `antler up` starts and `antler run` knows by name.

Each is an `async def run(bus, config)` entry named as `module:function`, so
importing one component never imports the others. `antler run` also accepts
any `module:function` path, for components of your own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bus import ComponentEntry


@dataclass(frozen=True)
class ComponentSpec:
    """A component: its name, its `module:function` entry, and how `antler up` knows it is ready:
    `consumers` (it says so itself with `bus.component_ready()`, as `bus.run_consumers` does once
    its consumers take work, and the sandbox broker once its service is up), `service` (its
    micro service answers a `$SRV` ping) or `listening` (the gateway wrote the URL it serves)."""

    name: str
    entry: str
    description: str
    enabled: Callable[[Any], bool] = lambda config: True
    ready: str = "consumers"


COMPONENTS: dict[str, ComponentSpec] = {
    spec.name: spec
    for spec in (
        ComponentSpec("runner", "agents.runner:run", "the lead agent: RunRequests in, run events out"),
        ComponentSpec(
            "subagents",
            "agents.subagents:run",
            "subagent tasks (the task tool) in agents of their own",
            lambda c: c.subagents.enabled,
        ),
        ComponentSpec(
            "memory",
            "memory.updater:run",
            "long-term memory: revises each user's memory from their conversations",
            lambda c: c.memory.enabled,
        ),
        ComponentSpec(
            "sandbox",
            "sandbox.broker:run",
            "commands and files per thread, isolated with bwrap",
        ),
        ComponentSpec(
            "browser",
            "browser.service:run",
            "Chromium pages per thread for the agent's browser tools",
            lambda c: c.browser.enabled,
        ),
        ComponentSpec(
            "scheduler",
            "schedules.scheduler:run",
            "scheduled tasks: the server's firings to runs, the schedules service",
        ),
        ComponentSpec("router", "channels.router:run", "chats to threads, commands, run events to replies"),
        ComponentSpec(
            "telegram",
            "channels.telegram:run",
            "Telegram bot (long polling)",
            lambda c: c.channels.telegram.enabled,
        ),
        ComponentSpec(
            "slack", "channels.slack:run", "Slack app (Socket Mode)", lambda c: c.channels.slack.enabled
        ),
        ComponentSpec(
            "feishu",
            "channels.feishu:run",
            "Feishu/Lark bot (long connection)",
            lambda c: c.channels.feishu.enabled,
        ),
        ComponentSpec(
            "dingtalk",
            "channels.dingtalk:run",
            "DingTalk robot (Stream mode)",
            lambda c: c.channels.dingtalk.enabled,
        ),
        ComponentSpec(
            "discord",
            "channels.discord:run",
            "Discord bot (gateway websocket)",
            lambda c: c.channels.discord.enabled,
        ),
        ComponentSpec(
            "wecom",
            "channels.wecom:run",
            "WeCom self-built app (callback URL)",
            lambda c: c.channels.wecom.enabled,
        ),
        ComponentSpec(
            "wechat",
            "channels.wechat:run",
            "WeChat Official Account (callback URL)",
            lambda c: c.channels.wechat.enabled,
        ),
        ComponentSpec(
            "msteams",
            "channels.msteams:run",
            "Microsoft Teams bot (messaging endpoint)",
            lambda c: c.channels.msteams.enabled,
        ),
        ComponentSpec(
            "agentproto",
            "agentproto.host:run",
            "the NATS agent protocol: agents discoverable and promptable by any NATS client",
            lambda c: c.agent_protocol.enabled,
        ),
        ComponentSpec(
            "gateway",
            "gateway.server:run",
            "HTTP: the LangGraph-compatible API",
            lambda c: c.gateway.enabled,
            ready="listening",
        ),
    )
}


class UnknownComponent(LookupError):
    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(COMPONENTS)) or "none yet"
        super().__init__(f"unknown component {name!r}; known components: {known}; or give module:function")


def resolve_component(name: str) -> tuple[str, ComponentEntry]:
    """`(display name, entry)` for a registered name or a `module:function` path.

    Raises:
        UnknownComponent: neither a known name nor an importable path.
    """
    spec = COMPONENTS.get(name)
    target = spec.entry if spec else name
    if ":" not in target:
        raise UnknownComponent(name)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UnknownComponent(name) from exc
    entry = getattr(module, attr, None)
    if not callable(entry):
        raise UnknownComponent(name)
    return (spec.name if spec else target), entry
