"""Per-person budgets: a person who has used their role's daily tokens up is told so (the limit, when it
resets) while another person's runs go on; each call's tokens and cost are counted per person."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from access import AuditLog, RoleBook
from access.usage import PeriodUsage, UsageBook
from bus import Bus
from bus.messages import (
    ThreadCompactReply,
    ThreadCompactRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
)
from bus.service import ServiceError, call
from config import AppConfig
from config.access import AccessConfig
from config.loader import _build
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.chat import Chat, running_router
from tests.support.eventually import eventually
from tests.support.gateway import running_gateway
from tests.support.runner import ask, running_runner, submit_and_collect


@pytest.fixture
def metered_config(config_data: dict[str, Any]) -> AppConfig:
    base = config_data["models"][0]
    data = {
        **config_data,
        "models": [{**base, "input_price_per_million": 1000.0, "output_price_per_million": 2000.0}],
        "sandbox": {"provider": "local"},
        "access": {"roles": {"member": {}, "metered": {"budget": {"tokens_per_day": 5}}}},
    }
    return _build(AppConfig, data, "test config")


def answer_text(events: list[Any]) -> str:
    values = [e.data for e in events if e.event == "values"]
    messages = values[-1]["messages"]
    return str(messages[-1]["content"])


async def test_a_person_over_their_daily_budget_is_told_so_and_another_goes_on(
    bus: Bus, nats_url: str, metered_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    await (await RoleBook.open(bus)).assign("ivy", "metered", source="test")
    async with running_runner(nats_url, metered_config):
        fake_model.script(
            Reply(text="first answer for ivy", when="ivy one"),
            Reply(text="hello max", when="max one"),
            Reply(text="hello again max", when="max two"),
        )
        events = await submit_and_collect(bus, ask("th-ivy", "ivy one please", user_id="ivy"))
        assert answer_text(events) == "first answer for ivy"  # under budget before the call

        asked = len(fake_model.agent_requests)
        events = await submit_and_collect(bus, ask("th-ivy", "ivy two please", user_id="ivy"))
        refusal = answer_text(events)
        assert "daily budget of 5 tokens" in refusal
        assert "resets at" in refusal
        assert "00:00 UTC" in refusal
        assert not [e for e in events if e.event == "error"]  # an answer, not a broken run
        assert len(fake_model.agent_requests) == asked  # the model was not called for ivy

        events = await submit_and_collect(bus, ask("th-max", "max one", user_id="max"))
        assert answer_text(events) == "hello max"
        events = await submit_and_collect(bus, ask("th-max", "max two", user_id="max"))
        assert answer_text(events) == "hello again max"

        # What else calls a model for ivy is refused too: follow-up suggestions, /compact.
        suggestions = ThreadSuggestionsRequest(thread_id="th-ivy", user_id="ivy")
        compact = ThreadCompactRequest(thread_id="th-ivy", user_id="ivy")
        for endpoint, request, reply in (
            ("suggestions", suggestions, ThreadSuggestionsReply),
            ("compact", compact, ThreadCompactReply),
        ):
            with pytest.raises(ServiceError) as refused_call:
                await call(bus, "threads", endpoint, request, reply, timeout=30)
            assert refused_call.value.code == "not_allowed"
            assert "daily budget of 5 tokens" in refused_call.value.message
        assert len(fake_model.agent_requests) == asked + 2  # max's two runs only

    usage = UsageBook(await bus.js.key_value(bus.subjects.bucket("usage")))
    ivy_day = (await usage.usage("ivy"))[0]
    assert ivy_day.tokens > 5
    assert ivy_day.cost > 0  # the model has prices
    everyone = await usage.everyone()
    assert set(everyone) == {"ivy", "max"}
    refused = await AuditLog(bus).read(user_id="ivy", action="budget_refused")
    assert len(refused) == 3  # the run, the suggestions, the compaction
    assert "5 tokens" in refused[0].detail["reason"]


async def test_people_see_their_usage_in_chats_and_the_api_and_admins_see_everyones(
    bus: Bus, nats_url: str, stack_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    config = stack_config.model_copy(
        update={
            "access": AccessConfig.model_validate({"roles": {"member": {"budget": {"tokens_per_day": 1000}}}})
        }
    )
    async with (
        running_runner(nats_url, config),
        running_router(nats_url, config),
        running_gateway(nats_url, config) as base,
        Chat(bus) as chat,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}, timeout=30) as ana,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-bob"}, timeout=30) as bob,
    ):
        fake_model.script(Reply(text="hi bob", when="bob here"), Reply(text="hi chat", when="chat here"))
        await submit_and_collect(bus, ask("th-bob", "bob here", user_id="bob"))
        mine = (await bob.get("/usage")).json()["people"][0]
        assert mine["user_id"] == "bob"
        assert mine["role"] == "member"
        day = mine["periods"][0]
        assert day["period"] == "day"
        assert day["tokens"] > 0
        assert day["token_limit"] == 1000

        refused = await bob.get("/usage", params={"all": "true"})
        assert refused.status_code == 403
        assert refused.json()["detail"].startswith("user:")
        assert (await bob.get("/usage", params={"user": "ana"})).status_code == 403
        everyone = (await ana.get("/usage", params={"all": "true"})).json()["people"]
        assert [p["user_id"] for p in everyone] == ["bob"]
        theirs = (await ana.get("/usage", params={"user": "bob"})).json()["people"][0]
        assert theirs["periods"][0]["tokens"] == day["tokens"]

        await chat.say("chat here")
        assert (await chat.final()).text == "hi chat"
        await chat.say("/usage")
        shown = (await chat.final()).text
        assert "role 'member'" in shown
        assert re.search(r"Today: [1-9]\d* tokens of 1000", shown), shown


async def test_calls_counted_at_once_by_many_runners_lose_no_tokens(bus: Bus) -> None:
    books = [UsageBook(await bus.js.key_value(bus.subjects.bucket("usage"))) for _ in range(4)]
    await asyncio.gather(*(books[i % 4].add("ivy", 10, 0.5) for i in range(20)))
    day, month = await books[0].usage("ivy")
    assert (day.tokens, month.tokens) == (200, 200)
    assert day.cost == pytest.approx(10.0)


async def test_the_title_and_the_summary_written_for_a_person_count_against_their_budget(
    bus: Bus, nats_url: str, config_data: dict[str, Any], fake_model: FakeOpenAI
) -> None:
    """The thread's title and the summary of its older turns are written by models of their own,
    the only ones with prices: whatever cost the person's counters show is theirs."""
    base = {**config_data["models"][0], "context_window": 1000}  # summarised from 800 tokens
    per_token = 1_000_000.0  # 1 a token
    data = {
        **config_data,
        "models": [
            base,
            {**base, "name": "titler", "model": "titler-1", "output_price_per_million": per_token},
            {**base, "name": "summer", "model": "summer-1", "input_price_per_million": per_token},
        ],
        "sandbox": {"provider": "local"},
        "title": {"enabled": True, "model_name": "titler"},
        "summarization": {"enabled": True, "model_name": "summer"},
    }
    config = _build(AppConfig, data, "test config")
    usage = UsageBook(await bus.js.key_value(bus.subjects.bucket("usage")))
    filler = " ".join(f"note {n}: the quarterly figures were reviewed twice." for n in range(40))
    async with running_runner(nats_url, config):
        fake_model.script(Reply(text="Noted.", when="first turn"))
        await submit_and_collect(bus, ask("th-ivy-long", f"first turn {filler}", user_id="ivy"))
        titled = await eventually(lambda: cost_above(usage, 0), "the title counted")
        assert 1 <= titled.cost <= 10  # the title's few words, at 1 a token; the answer costs nothing

        fake_model.script(
            Reply(text="- the figures were reviewed", when="Context Extraction Assistant"),
            Reply(text="Reviewed twice.", when="second turn"),
        )
        events = await submit_and_collect(bus, ask("th-ivy-long", f"{filler} second turn", user_id="ivy"))
        assert answer_text(events) == "Reviewed twice."
        assert any(r["model"] == "summer-1" for r in fake_model.requests)
        # The summary read hundreds of tokens at 1 a token.
        summarised = await eventually(lambda: cost_above(usage, titled.cost + 100), "the summary counted")
        assert summarised.tokens > titled.tokens

        # Follow-up suggestions (here by the titler) and /compact (by the summer) are ivy's calls too.
        fake_model.auto_suggestions = ["What next?", "Why twice?"]
        asked = ThreadSuggestionsRequest(thread_id="th-ivy-long", user_id="ivy", model_name="titler")
        await call(bus, "threads", "suggestions", asked, ThreadSuggestionsReply, timeout=30)
        # With no budget to check, a count is written after the answer went on.
        suggested = await eventually(lambda: cost_above(usage, summarised.cost), "the suggestions counted")
        fake_model.script(Reply(text="- reviewed twice", when="Context Extraction Assistant"))
        compact = ThreadCompactRequest(thread_id="th-ivy-long", user_id="ivy")
        assert (await call(bus, "threads", "compact", compact, ThreadCompactReply, timeout=30)).compacted
        await eventually(lambda: cost_above(usage, suggested.cost), "the compaction counted")


async def cost_above(usage: UsageBook, cost: float) -> PeriodUsage | None:
    """Ivy's day, once its cost is above `cost`."""
    day = (await usage.usage("ivy"))[0]
    return day if day.cost > cost else None


async def test_a_new_day_starts_the_days_count_again_and_the_month_goes_on(bus: Bus) -> None:
    book = UsageBook(await bus.js.key_value(bus.subjects.bucket("usage")))
    evening, morning = datetime(2026, 11, 27, 23, 50, tzinfo=UTC), datetime(2026, 11, 28, 0, 10, tzinfo=UTC)
    await book.add("ivy", 100, 1.0, at=evening)
    await book.add("ivy", 30, 0.25, at=morning)
    day, month = await book.usage("ivy", at=morning)
    assert (day.tokens, day.cost, month.tokens, month.cost) == (30, 0.25, 130, 1.25)
    next_month = datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert [(u.tokens, u.cost) for u in await book.usage("ivy", at=next_month)] == [(0, 0.0), (0, 0.0)]
    assert "ivy" not in await book.everyone(at=next_month), "the admins' view lists this month's users"
    assert {u.period: u.tokens for u in (await book.everyone(at=morning))["ivy"]} == {"day": 30, "month": 130}


async def test_counts_kept_by_an_earlier_version_go_on_after_the_upgrade(bus: Bus) -> None:
    """Earlier versions kept a key per period: what a person used before the upgrade still counts."""
    kv = await bus.js.key_value(bus.subjects.bucket("usage"))
    now = datetime(2026, 11, 28, 12, tzinfo=UTC)
    digest = hashlib.sha256(b"ivy").hexdigest()[:40]
    for key, tokens in ((f"day.20261128.{digest}", 40), (f"month.202611.{digest}", 900)):
        await kv.put(key, json.dumps({"user_id": "ivy", "tokens": tokens, "cost": tokens / 100}).encode())
    book = UsageBook(kv)
    assert [u.tokens for u in await book.usage("ivy", at=now)] == [40, 900]
    assert [u.tokens for u in (await book.everyone(at=now))["ivy"]] == [40, 900]
    await book.add("ivy", 10, 0.1, at=now)
    assert [u.tokens for u in await book.usage("ivy", at=now)] == [50, 910]
    assert [u.tokens for u in (await book.everyone(at=now))["ivy"]] == [50, 910], "counted once"
