"""Chat platforms: Slack, Telegram, Feishu, DingTalk, Discord, WeCom, WeChat Official Accounts,
Microsoft Teams, GitHub, Matrix."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from config._env import Section


class ChannelConfig(Section):
    enabled: bool = False
    allowed_users: list[str] = Field(default_factory=list, description="Empty = everyone.")
    allowed_chats: list[str] = Field(default_factory=list, description="Empty = every chat.")
    require_mention_in_groups: bool = True


class SlackConfig(ChannelConfig):
    bot_token: str | None = None
    app_token: str | None = None
    base_url: str | None = Field(None, description="Web API base (tests point it at a local fake).")


class TelegramConfig(ChannelConfig):
    bot_token: str | None = None
    base_url: str | None = Field(None, description="Bot API base (tests point it at a local fake).")
    webhook_url: str | None = Field(
        None, description="Public HTTPS URL Telegram posts updates to; unset = long polling."
    )
    webhook_listen: str = Field(
        "127.0.0.1", description="Where the webhook server listens (behind your proxy)."
    )
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: str | None = Field(None, description="Checked on every update; unset = a random one.")


class FeishuConfig(ChannelConfig):
    app_id: str | None = None
    app_secret: str | None = None
    domain: str | None = Field(None, description="feishu (default), lark, or the open platform URL.")


class DingTalkConfig(ChannelConfig):
    client_id: str | None = None
    client_secret: str | None = None
    card_template_id: str | None = Field(
        None, description="An AI card template to stream answers into; unset = Markdown replies."
    )
    card_content_key: str = Field("content", description="The template's variable holding the answer.")
    base_url: str | None = Field(None, description="Open API base URL (tests point it at a local fake).")


class DiscordConfig(ChannelConfig):
    bot_token: str | None = None
    base_url: str | None = Field(
        None, description="REST API base, up to /api/v10 (tests point it at a local fake)."
    )


class _CallbackConfig(ChannelConfig):
    """A platform that posts its messages to a URL of ours (WeCom, WeChat Official Accounts)."""

    token: str | None = Field(None, description="The callback Token set in the platform's console.")
    encoding_aes_key: str | None = Field(
        None, description="The callback EncodingAESKey (43 characters) set in the platform's console."
    )
    webhook_path: str = Field("/", description="The callback URL's path, as the platform posts to it.")
    webhook_listen: str = Field(
        "127.0.0.1", description="Where the callback server listens (behind your HTTPS proxy)."
    )
    base_url: str | None = Field(None, description="API base URL (tests point it at a local fake).")


class WeComConfig(_CallbackConfig):
    webhook_port: int = Field(8444, ge=1, le=65535)
    corp_id: str | None = Field(None, description="The company's CorpID (ww…).")
    agent_id: int | None = Field(None, description="The self-built app's AgentId.")
    secret: str | None = Field(None, description="The self-built app's Secret.")


class WeChatConfig(_CallbackConfig):
    webhook_port: int = Field(8445, ge=1, le=65535)
    app_id: str | None = Field(None, description="The Official Account's AppID (wx…).")
    app_secret: str | None = Field(None, description="The Official Account's AppSecret.")
    passive_reply_seconds: float = Field(
        4.0,
        ge=0,
        le=4.8,
        description="How long a callback waits for the answer to reply with it; later answers go "
        "through the customer-service message API (WeChat gives up on a callback after 5 s).",
    )


class MSTeamsConfig(ChannelConfig):
    """A Microsoft Teams bot (Azure Bot resource): the Bot Connector posts to our messaging endpoint."""

    app_id: str | None = Field(None, description="The bot's Microsoft App ID (Azure Bot, Configuration).")
    app_password: str | None = Field(None, description="A client secret of that app registration.")
    tenant_id: str | None = Field(
        None, description="The app's tenant for a single-tenant bot; unset = multi-tenant (botframework.com)."
    )
    webhook_path: str = Field("/api/messages", description="The messaging endpoint's path.")
    webhook_listen: str = Field(
        "127.0.0.1", description="Where the messaging endpoint listens (behind your HTTPS proxy)."
    )
    webhook_port: int = Field(3978, ge=1, le=65535)
    token_url: str | None = Field(
        None, description="OAuth token endpoint for the connector token; unset = Microsoft's (tests: a fake)."
    )
    signing_keys_url: str | None = Field(
        None,
        description="The Bot Framework's signing keys (a JWKS, or OpenID metadata naming one); "
        "unset = Microsoft's (tests: a fake). Checking tokens is never off.",
    )


class GitHubConfig(ChannelConfig):
    """A GitHub App (or a token) answering issue and pull-request comments that mention it."""

    token: str | None = Field(
        None, description="A token to post comments with (fine-grained: Issues and Pull requests, write)."
    )
    app_id: int | None = Field(None, description="A GitHub App's id: comments are posted as the App.")
    private_key: str | None = Field(None, description="The App's private key (PEM), or a path to it.")
    webhook_secret: str | None = Field(
        None, description="The webhook's secret; every delivery's signature is checked."
    )
    bot_login: str | None = Field(
        None,
        description="The login mentions name (`@login`); unset = the token's user or the App's slug[bot].",
    )
    repositories: list[str] = Field(
        default_factory=list, description="owner/name of the repositories answered; empty = every one."
    )
    files_base_url: str | None = Field(
        None, description="The gateway's public URL: presented files are linked to its artifact route."
    )
    edit_interval_seconds: float = Field(
        3.0,
        ge=1.0,
        description="Least time between two edits of a streaming comment (secondary rate limits).",
    )
    webhook_path: str = Field("/github/webhook", description="The path GitHub posts deliveries to.")
    webhook_listen: str = Field(
        "127.0.0.1", description="Where the webhook server listens (behind your proxy)."
    )
    webhook_port: int = Field(8446, ge=1, le=65535)
    base_url: str | None = Field(
        None, description="REST API base (GitHub Enterprise; tests point it at a fake)."
    )
    web_url: str = Field(
        "https://github.com", description="Where comments' attachments live (GitHub Enterprise: its address)."
    )


class MatrixConfig(ChannelConfig):
    """A Matrix account the adapter logs in as (any homeserver: Synapse, Conduit, matrix.org...)."""

    homeserver: str | None = Field(
        None, description="The homeserver's client API URL (https://matrix.example.org)."
    )
    user_id: str | None = Field(None, description="The bot's full user id (@antler:example.org).")
    access_token: str | None = Field(None, description="An access token of the bot's (or give password).")
    password: str | None = Field(None, description="The bot's password: the adapter logs in at start.")
    device_id: str | None = Field(None, description="The device the access token belongs to.")


class ChannelsConfig(Section):
    stream_update_seconds: float = Field(1.0, ge=0, description="Least time between partial reply edits.")
    router_processes: int = Field(
        1,
        ge=1,
        description="Router processes `antler up` starts (they share the chat partitions, "
        "`bus.chat_partitions`); 1 = inside `antler up` itself.",
    )
    subagent_enabled: bool = Field(
        False, description="Chat runs may delegate to subagents (the task tool); progress shows in the reply."
    )
    multitask_strategy: Literal["enqueue", "steer", "interrupt"] = Field(
        "steer",
        description="A message sent while the chat's run works: steer (added to the running answer "
        "before its next model call, or to the run that answers the approval it waits for), enqueue "
        "(answered after it, on its own), interrupt (stops it, answered instead).",
    )
    slack: SlackConfig = Field(default_factory=SlackConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)
    dingtalk: DingTalkConfig = Field(default_factory=DingTalkConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    wecom: WeComConfig = Field(default_factory=WeComConfig)
    wechat: WeChatConfig = Field(default_factory=WeChatConfig)
    msteams: MSTeamsConfig = Field(default_factory=MSTeamsConfig)
    github: GitHubConfig = Field(default_factory=GitHubConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
