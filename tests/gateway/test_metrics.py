"""`GET /metrics`: what an operator's Prometheus scrapes, read with Prometheus's own text parser.

The test stack runs every component in this process, so the counts come from its registry; the
families merged from other processes over the bus are tested in tests/bus/test_metrics_feed.py.
Counters are process-wide (other tests in this worker count too): each test compares before and after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bus import Bus
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(http: httpx.AsyncClient) -> Samples:
    answer = await http.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            key = (sample.name, frozenset((k, v) for k, v in sample.labels.items() if k != "process"))
            samples[key] = samples.get(key, 0.0) + sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (over every process)."""
    wanted = set(labels.items())
    return sum(value for (n, have), value in samples.items() if n == name and wanted <= have)


async def until(http: httpx.AsyncClient, check: Callable[[Samples], bool]) -> Samples:
    """Scrape until `check` holds (counts settle as handlers finish after the reply is out)."""
    for _ in range(200):
        samples = await scrape(http)
        if check(samples):
            return samples
        await asyncio.sleep(0.05)
    return samples


def gateway_client(base: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, headers={"x-api-key": token}, timeout=30)


async def test_metrics_count_the_turns_sent_the_tool_and_model_calls_and_a_dead_letter(
    api_url: str, http: httpx.AsyncClient, fake_model: FakeOpenAI, bus: Bus
) -> None:
    async with gateway_client(api_url, "tok-ana") as admin:
        before = await scrape(admin)
        body = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "go"}]},
            "stream_mode": ["messages-tuple"],  # streamed model calls: a first chunk to time
        }
        fake_model.script(
            Reply(tool_calls=[ToolCall("bash", {"command": "echo hi"})]),
            Reply(text="Said hi."),
            Reply(text="Second."),
            Reply(text="Third."),
        )
        turns = 3
        for number in range(turns):
            thread = (await http.post("/threads", json={})).json()["thread_id"]
            answer = await http.post(f"/threads/{thread}/runs/stream", json=body)
            assert answer.status_code == 200, f"turn {number}: {answer.text}"
        # A poison message: not a RunRequest. The runner's consumer dead-letters it.
        await bus.publish(bus.subjects.runs_submit, b'{"v": 1, "nonsense": true}')

        runs = bus.subjects.runs_stream

        def settled(s: Samples) -> bool:
            dead = total(s, "antler_dead_letters_total", stream=runs)
            ended = total(s, "antler_runs_finished_total")
            return (
                dead > total(before, "antler_dead_letters_total", stream=runs)
                and ended >= total(before, "antler_runs_finished_total") + turns
            )

        after = await until(admin, settled)

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert grew("antler_runs_finished_total", outcome="success") == turns
    assert grew("antler_runs_finished_total") == turns, "no other outcome"
    assert grew("antler_run_duration_seconds_count", outcome="success") == turns
    assert grew("antler_run_queue_wait_seconds_count") == turns
    assert grew("antler_tool_calls_total", gen_ai_tool_name="bash", outcome="ok") == 1
    assert grew("antler_sandbox_commands_total", outcome="ok") == 1
    assert grew("antler_sandbox_command_duration_seconds_count") == 1
    model = {"gen_ai_operation_name": "chat", "gen_ai_request_model": "fake"}
    # Four model calls of the agent (a tool call and its answer, two plain answers), titles aside.
    assert grew("gen_ai_client_operation_duration_seconds_count", **model, error_type="") >= turns + 1
    assert grew("gen_ai_client_operation_time_to_first_chunk_seconds_count", **model) >= turns + 1
    assert grew("gen_ai_client_token_usage_count", **model, gen_ai_token_type="input") >= turns + 1
    assert grew("gen_ai_client_token_usage_sum", **model, gen_ai_token_type="output") > 0
    dead = grew(
        "antler_dead_letters_total", stream=bus.subjects.runs_stream, consumer="runner", reason="bad_input"
    )
    assert dead == 1
    # JetStream's view of each durable, read from the server by the gateway.
    assert (
        "antler_consumer_pending_messages",
        frozenset({("stream", bus.subjects.runs_stream), ("durable", "runner")}),
    ) in after
    assert total(after, "antler_runs_pending") == 0
    assert total(after, "antler_runs_running") == 0


async def test_metrics_are_for_admins_only(api_url: str) -> None:
    async with gateway_client(api_url, "tok-bob") as bob:
        answer = await bob.get("/metrics")
    assert answer.status_code == 403
    assert "admin" in answer.json()["detail"]
    async with httpx.AsyncClient(base_url=api_url) as nobody:
        assert (await nobody.get("/metrics")).status_code == 401
