"""One chat message is one trace, across every component it passes through (bus.tracing).

The Telegram adapter (real python-telegram-bot against the fake Bot API), router, runner, sandbox
broker and subagent executor run as in `antler up`, each on its own NATS connection; tracing is on
with the OpenTelemetry SDK's in-memory exporter. Each span says which connection (component) made it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from channels.telegram import run as run_telegram
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support.adapters import adapter_stack, telegram  # noqa: F401  (the fake Bot API fixture)
from tests.support.subagents import running_executor, task_call
from tests.support.tracing import parent_of, spans  # noqa: F401  (the fixture)


def by_name(found: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def one(found: list[ReadableSpan], name: str) -> ReadableSpan:
    matching = by_name(found, name)
    assert len(matching) == 1, f"{name}: {[s.name for s in found]}"
    return matching[0]


def ancestors(found: list[ReadableSpan], span: ReadableSpan) -> list[str]:
    names = []
    while span.parent is not None:
        span = parent_of(found, span)
        names.append(span.name)
    return names


async def test_a_chat_message_with_bash_and_a_subagent_is_one_trace_across_the_components(
    spans: InMemorySpanExporter,  # noqa: F811
    nats_url: str,
    telegram: FakeTelegram,  # noqa: F811
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo traced"})], when="trace this"),
        Reply(tool_calls=[task_call("call_sub", "Find fact A")], when="traced"),
        Reply(text="A is 1", when="Find fact A"),
        Reply(text="All done.", when="A is 1"),
    )
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}

    def with_subagents() -> AppConfig:  # chats' runs may delegate (after adapter_stack's channel settings)
        config_data["channels"]["subagent_enabled"] = True
        return app_config()

    async with adapter_stack(
        nats_url, config_data, with_subagents, "telegram", settings, run_telegram
    ) as config:
        async with running_executor(nats_url, config):
            await telegram.wait_for("getMe")
            telegram.send_user_message("trace this please")
            for _ in range(400):  # the final reply shown, and the adapter's handling of it ended
                shown = [p.get("text") for m, p in telegram.calls if m in ("sendMessage", "editMessageText")]
                replies = [s for s in spans.get_finished_spans() if s.name == "process telegram"]
                if "All done." in shown and len(replies) >= 1:
                    break
                await asyncio.sleep(0.05)
            assert "All done." in shown, (
                fake_model.pending,
                [r["messages"][-1] for r in fake_model.agent_requests],
            )

    found = list(spans.get_finished_spans())
    sent = [s for s in found if s.name.startswith(f"send {config.bus.prefix}.chat.in.telegram.")]
    assert len(sent) == 1, [s.name for s in found]
    root = sent[0]
    assert root.parent is None, "the adapter starts the trace"
    assert root.kind is SpanKind.PRODUCER
    trace = [s for s in found if s.context.trace_id == root.context.trace_id]
    made_by = {s.attributes.get("antler.process") for s in trace} - {None}
    assert {"test-telegram", "test-router", "test-runner", "test-broker", "test-subagents"} <= made_by

    # adapter -> router -> runner
    routed = [s for s in trace if s.name.startswith("process router-in-")]  # its partition's durable
    assert len(routed) == 1, [s.name for s in trace]
    router = routed[0]
    assert parent_of(trace, router) is root
    runner = one(trace, "process runner")
    assert parent_of(trace, runner) is router
    lead = one(trace, "invoke_agent lead_agent")
    assert parent_of(trace, lead) is runner
    assert lead.attributes["gen_ai.operation.name"] == "invoke_agent"

    # the lead's model calls and tools
    chats = [s for s in by_name(trace, "chat fake") if parent_of(trace, s) is lead]
    assert len(chats) == 3, "three model turns of the lead: bash, task, the answer"
    for call in chats:
        assert call.kind is SpanKind.CLIENT
        assert call.attributes["gen_ai.request.model"] == "fake"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert call.attributes["gen_ai.usage.output_tokens"] > 0
    assert any("gen_ai.response.time_to_first_chunk" in c.attributes for c in chats), "streamed calls"
    bash = one(trace, "execute_tool bash")
    assert parent_of(trace, bash) is lead
    assert bash.attributes["gen_ai.tool.name"] == "bash"
    command = one(trace, "sandbox exec")
    assert command.kind is SpanKind.SERVER
    assert command.attributes["antler.process"] == "test-broker"
    assert parent_of(trace, command) is bash

    # the subagent, a child of the lead's task call, in the executor
    task = one(trace, "execute_tool task")
    assert parent_of(trace, task) is lead
    taken = one(trace, "process subagents")
    assert taken.attributes["antler.process"] == "test-subagents"
    assert parent_of(trace, taken) is task
    sub = one(trace, "invoke_agent general-purpose")
    assert parent_of(trace, sub) is taken
    assert [parent_of(trace, s) for s in by_name(trace, "chat fake") if s not in chats] == [sub]

    # the reply, delivered by the adapter, in the same trace
    delivered = [
        s for s in by_name(trace, "process telegram") if s.attributes["antler.process"] == "test-telegram"
    ]
    assert delivered, "the adapter's delivery of the reply"
    assert all("invoke_agent lead_agent" in ancestors(trace, s) for s in delivered)
