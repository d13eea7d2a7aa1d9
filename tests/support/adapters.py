"""A chat platform's whole path for tests of several packages: runner, sandbox broker, router and
the adapter under test (`adapter_stack`, or the `start_adapter` fixture that binds it to the test's
server and config); the Telegram, Slack, Teams, Feishu and DingTalk stacks (`telegram_stack`,
`slack_stack`, `teams_stack`, `feishu_stack`, `dingtalk_stack`); the fake platforms as fixtures
(`telegram`, `discord`, `slack`, `feishu`, `dingtalk`, `wecom`, `wechat`, `teams`); the model
scripts several platforms' tests share (`approved_then_denied`, `file_in_file_out`) and checks
(`the_model_read_the_denial`, `the_agent_read`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import pytest
import pytest_asyncio

from bus import Bus
from channels.dingtalk import run as run_dingtalk
from channels.feishu import run as run_feishu
from channels.msteams import run as run_msteams
from channels.slack import run as run_slack
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.conftest import running_component
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.feishu_server import APP_ID, APP_SECRET, FakeFeishu
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.wechat_server import FakeWeChat
from tests.fakes.wecom_server import FakeWeCom
from tests.support.chat import running_router
from tests.support.fakes import fake_fixture
from tests.support.ports import free_port
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker

Fake = TypeVar("Fake")
Entry = Callable[[Bus, AppConfig], Awaitable[None]]


@contextlib.asynccontextmanager
async def adapter_stack(
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    platform: str,
    settings: dict[str, Any],
    entry: Entry | None,
    channels: dict[str, Any] | None = None,
) -> AsyncIterator[AppConfig]:
    """The whole path for one platform, with fast partial updates and the local sandbox.

    With `entry` None the adapter is left to the test (to stop and start it); `channels`: more of
    the `channels` section."""
    config_data["channels"] = {
        "stream_update_seconds": 0.05,
        **(channels or {}),
        platform: {"enabled": True, **settings},
    }
    config_data["sandbox"] = {"provider": "local"}
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_broker(nats_url, config),
        running_router(nats_url, config),
        running_component(nats_url, config, entry, platform) if entry else contextlib.nullcontext(),
    ):
        yield config


# Each message its own run, one after another (chats steer by default: a message sent while an
# answer streams would join that run): what the tests of adapter copies count on.
ENQUEUE = {"multitask_strategy": "enqueue"}


class StartAdapter(Protocol):
    """`adapter_stack` on the test's server and config (the `start_adapter` fixture)."""

    def __call__(
        self,
        platform: str,
        settings: dict[str, Any],
        entry: Entry | None,
        channels: dict[str, Any] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[AppConfig]: ...


@pytest.fixture
def start_adapter(
    nats_url: str, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> StartAdapter:
    """`start_adapter(platform, settings, entry)`: the whole path for one platform (`adapter_stack`)."""
    return functools.partial(adapter_stack, nats_url, config_data, app_config)


telegram = fake_fixture(FakeTelegram, "The fake Bot API the Telegram adapter talks to.")
discord = fake_fixture(FakeDiscord, "The fake Discord (REST API and Gateway) the Discord adapter talks to.")
slack = fake_fixture(FakeSlack, "The fake Slack (Web API and Socket Mode) the Slack adapter talks to.")
feishu = fake_fixture(FakeFeishu, "The fake Feishu (open API and long connection).")
dingtalk = fake_fixture(FakeDingTalk, "The fake DingTalk (open API and Stream mode).")
wecom = fake_fixture(FakeWeCom, "The fake WeCom (its API, and the client calling the adapter's callback).")
wechat = fake_fixture(FakeWeChat, "The fake WeChat official account (its API and callback client).")
teams = fake_fixture(
    FakeTeams, "The fake Teams (token service, signing keys, Bot Connector) the Teams adapter talks to."
)


def the_agent_read(fake_model: FakeOpenAI, upload: str, content: str) -> None:
    """The message's upload was named to the model, which read `content` from it next."""
    assert f"/mnt/user-data/uploads/{upload}" in unfenced(
        fake_model.agent_requests[0]["messages"][-1]["content"]
    )
    assert unfenced(fake_model.agent_requests[1]["messages"][-1]["content"]) == content


def file_in_file_out(upload: str, output: str, content: str, answer: str) -> list[Reply]:
    """The model's turns when a user sends a file and gets one back: it reads the upload (named
    `upload`), writes `content` to the output `output`, presents it, and answers `answer`."""
    written = f"/mnt/user-data/outputs/{output}"
    return [
        Reply(tool_calls=[ToolCall("read_file", {"path": f"/mnt/user-data/uploads/{upload}"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": written, "content": content})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [written]})]),
        Reply(text=answer),
    ]


def approved_then_denied(marker: str) -> list[Reply]:
    """The model's turns when a chat approves one bash call and denies the next: it asks to run
    `echo <marker>` on "run the first" and answers "Ran it: <marker>." once it ran; it asks again on
    "run the second" and answers "Not run, as you said." once it reads the denial."""
    return [
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo {marker}"})], when="run the first"),
        Reply(text=f"Ran it: {marker}.", when=marker),
        Reply(tool_calls=[ToolCall("bash", {"command": "echo never-run"})], when="run the second"),
        Reply(text="Not run, as you said.", when="the user denied this call"),
    ]


def the_model_read_the_denial(fake_model: FakeOpenAI) -> None:
    """The denied call ran nothing: what the model read last is its tool result saying so."""
    denied = fake_model.agent_requests[-1]["messages"][-1]
    assert denied["role"] == "tool"
    assert "the user denied this call" in denied["content"]


@pytest_asyncio.fixture
async def telegram_stack(telegram: FakeTelegram, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Telegram adapter polling the fake, up and answering."""
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    async with start_adapter("telegram", settings, run_telegram) as config:
        await telegram.wait_for("getMe")
        yield config


@pytest_asyncio.fixture
async def teams_stack(teams: FakeTeams, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Teams adapter serving its messaging endpoint, its token fetched."""
    async with start_adapter("msteams", teams.settings(free_port()), run_msteams) as config:
        await teams.wait_for("token")
        yield config


@pytest_asyncio.fixture
async def slack_stack(slack: FakeSlack, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Slack adapter connected to the fake over Socket Mode."""
    settings = {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": slack.base_url}
    async with start_adapter("slack", settings, run_slack) as config:
        await asyncio.wait_for(slack.connected.wait(), 20)
        yield config


@pytest_asyncio.fixture
async def feishu_stack(feishu: FakeFeishu, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Feishu adapter on the fake's long connection."""
    settings = {"app_id": APP_ID, "app_secret": APP_SECRET, "domain": feishu.base_url}
    async with start_adapter("feishu", settings, run_feishu) as config:
        await feishu.wait(lambda: feishu.connections == 1)
        yield config


@pytest_asyncio.fixture
async def dingtalk_stack(dingtalk: FakeDingTalk, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the DingTalk adapter on the fake's Stream connection."""
    settings = {"client_id": "ding-id", "client_secret": "ding-secret", "base_url": dingtalk.base_url}
    async with start_adapter("dingtalk", settings, run_dingtalk) as config:
        await dingtalk.wait(lambda: dingtalk.connections == 1)
        yield config
