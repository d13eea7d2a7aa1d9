"""Every error the chat package raises on purpose, in one tree.

    ChannelError                          anything channels/ raises on purpose
    ├── RateLimited                       a platform asked to wait `delay` seconds, for one chat or for
    │                                     all (`scope`); the reply stream waits it out, never a failure
    ├── LeaseLost (RuntimeError)          this copy of an adapter no longer holds its lease
    │                                     (`delivery.standby`): it stops, and stands by again
    ├── MalformedMessage (ValueError)     a platform message the adapter cannot read; asking for it
    │                                     again would not help (acknowledged and dead-lettered)
    ├── PlatformError (RuntimeError)      a platform refused a call; trying again will not help
    │   ├── DingTalkError                 (`channels.dingtalk.api`)
    │   ├── DiscordError                  (`channels.discord.rest`, with the HTTP status and `code`)
    │   ├── FeishuError                   (`channels.feishu.adapter`, with the platform's `code`)
    │   ├── TeamsError                    (`channels.msteams.connector`, with the HTTP status)
    │   └── WeixinError                   (`channels.wechat.api`: WeCom's and WeChat's `errcode`)
    └── PlatformUnavailable (RuntimeError)  a platform failed in a way that passes (a 5xx):
        ├── DingTalkUnavailable             the reply is tried again later (`channels.dingtalk.api`)
        ├── DiscordUnavailable              (`channels.discord.rest`)
        ├── TeamsUnavailable                (`channels.msteams.connector`)
        └── WeixinUnavailable               (`channels.wechat.api`)

A platform's own errors live in its folder and derive from these, so code that handles every
platform alike (the reply stream, the standby) names only the bases. Errors of the bus runtime that
adapters raise (`bus.Misconfigured`, `bus.Unreachable`) stay in the bus's own tree.
"""

from __future__ import annotations

__all__ = [
    "ChannelError",
    "LeaseLost",
    "MalformedMessage",
    "PlatformError",
    "PlatformUnavailable",
    "RateLimited",
]


class ChannelError(Exception):
    """The base of every error the chat package raises on purpose."""


class RateLimited(ChannelError):
    """A platform asked to wait `delay` seconds before the next call.

    `scope` says what the wait holds: "chat" (the platform limits each chat: only that chat's
    replies wait) or "platform" (the bot's or app's limit: every reply on the platform waits).
    """

    def __init__(self, delay: float, detail: str = "rate limited", *, scope: str = "chat") -> None:
        self.delay = max(0.0, delay)
        self.scope = scope if scope in ("chat", "platform") else "chat"
        super().__init__(f"{detail} (wait {self.delay:g}s, {self.scope})")


class LeaseLost(ChannelError, RuntimeError):
    """This copy of an adapter no longer holds its lease: another may be active now."""


class MalformedMessage(ChannelError, ValueError):
    """A platform message this adapter cannot read; asking for it again would not help."""


class PlatformError(ChannelError, RuntimeError):
    """A platform refused a call in a way that trying again will not mend."""


class PlatformUnavailable(ChannelError, RuntimeError):
    """A platform failed in a way that passes (a 5xx): the reply is tried again later."""
