"""Each adapter says how its platform connection is doing, as operators see it (`/health`, `antler
top`): unhealthy, naming the platform, while the platform cannot be reached (at start or later),
healthy once it is back; a credential the platform refuses is reported as such (never quoted).

Every adapter runs as `antler up` runs it (`bus.serve`, restarted with backoff when it fails), on its
own connection as its own NATS user, against its real SDK and the platform's fake; a fake that
comes up later listens on the port the config named from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus
from channels.dingtalk import run as run_dingtalk
from channels.feishu import run as run_feishu
from channels.slack import run as run_slack
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.feishu_server import APP_ID, APP_SECRET, FakeFeishu
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.support.health import Entry, HealthWatch, adapter, status_of
from tests.support.ports import free_port

WatchAdapter = Callable[[str, dict[str, Any], Entry], contextlib.AbstractAsyncContextManager[HealthWatch]]


@pytest.fixture
def watch_adapter(
    nats_url: str, bus: Bus, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> WatchAdapter:
    """`watch_adapter(platform, settings, entry)`: the adapter served on its own user's connection,
    its pauses between starts short, and its health as `antler up` reports it."""

    return functools.partial(adapter, nats_url, bus, config_data, app_config)


async def test_slack_out_of_reach_at_start_is_unhealthy_until_it_is_there(
    watch_adapter: WatchAdapter,
) -> None:
    slack = FakeSlack()
    slack.port = free_port()
    settings = {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": slack.base_url}
    async with watch_adapter("slack", settings, run_slack) as watch:
        seen = await watch.until(status_of("slack", "unhealthy"))
        assert f"cannot reach 127.0.0.1:{slack.port}" in seen["slack"].text, seen
        async with slack:
            await asyncio.wait_for(slack.connected.wait(), 60)
            await watch.until(status_of("slack", "healthy"))


async def test_slack_refusing_the_app_token_is_reported_as_a_configuration_to_fix(
    watch_adapter: WatchAdapter,
) -> None:
    async with FakeSlack() as slack:
        settings = {"bot_token": "xoxb-test", "app_token": "xapp-revoked", "base_url": slack.base_url}
        async with watch_adapter("slack", settings, run_slack) as watch:
            seen = await watch.until(status_of("slack", "unhealthy"))
    text = seen["slack"].text
    assert text.startswith("Slack refused the app token (invalid_auth): check channels.slack.app_token"), text
    assert "xapp-revoked" not in text


async def test_telegram_polling_that_fails_later_is_unhealthy_until_telegram_answers_again(
    watch_adapter: WatchAdapter,
) -> None:
    async with FakeTelegram() as telegram:
        settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
        async with watch_adapter("telegram", settings, run_telegram) as watch:
            await watch.until(status_of("telegram", "healthy"))
            telegram.outage = True  # getUpdates answers 502 Bad Gateway
            seen = await watch.until(status_of("telegram", "unhealthy"))
            assert seen["telegram"].text == (
                f"127.0.0.1:{telegram.port} answers getUpdates with HTTP 502; polling again"
            )
            telegram.outage = False
            await watch.until(status_of("telegram", "healthy"), timeout=90)


async def test_telegram_refusing_the_bot_token_is_reported_without_quoting_it(
    watch_adapter: WatchAdapter,
) -> None:
    async with FakeTelegram() as telegram:
        settings = {"bot_token": "123:WRONG", "base_url": telegram.base_url}
        async with watch_adapter("telegram", settings, run_telegram) as watch:
            seen = await watch.until(status_of("telegram", "unhealthy"))
    text = seen["telegram"].text
    assert text.startswith("Telegram refused the bot token (Unauthorized): check channels.telegram.bot_token")
    assert "WRONG" not in text


async def test_dingtalk_out_of_reach_at_start_is_unhealthy_until_its_stream_connects(
    watch_adapter: WatchAdapter,
) -> None:
    dingtalk = FakeDingTalk()
    dingtalk.port = free_port()
    settings = {"client_id": "ding-id", "client_secret": "ding-secret", "base_url": dingtalk.base_url}
    async with watch_adapter("dingtalk", settings, run_dingtalk) as watch:
        seen = await watch.until(status_of("dingtalk", "unhealthy"))
        assert f"the stream is down (cannot reach 127.0.0.1:{dingtalk.port}" in seen["dingtalk"].text, seen
        async with dingtalk:
            await watch.until(status_of("dingtalk", "healthy"), timeout=90)


async def test_feishu_long_connection_lost_is_unhealthy_until_lark_reconnects(
    watch_adapter: WatchAdapter,
) -> None:
    async with FakeFeishu() as feishu:
        settings = {"app_id": APP_ID, "app_secret": APP_SECRET, "domain": feishu.base_url}
        async with watch_adapter("feishu", settings, run_feishu) as watch:
            await feishu.wait(lambda: feishu.connections >= 1)
            await watch.until(status_of("feishu", "healthy"))
            feishu.break_method("endpoint", 1_000)  # Feishu busy: lark-oapi's reconnections fail
            feishu.drop_connection()
            seen = await watch.until(status_of("feishu", "unhealthy"))
            assert seen["feishu"].text.startswith("the long connection to http://127.0.0.1:"), seen
            assert seen["feishu"].text.endswith("is down; lark-oapi is reconnecting"), seen
            feishu.server_errors["endpoint"] = 0
            await watch.until(status_of("feishu", "healthy"), timeout=90)
