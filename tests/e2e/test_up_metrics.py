"""`antler up` as users run it: the gateway's /metrics serves every process's counts, its runner
and sandbox children's included, each under its own `process` label (bus.metrics_feed).

On the shared `antler up` (tests/support/shared_up.py): the run counted is the difference to what
it counted before; that it lets every process publish its metrics is its nats-server's tripwire."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.openai_server import Reply
from tests.support.shared_up import SHARED_UP, SharedUp

pytestmark = SHARED_UP


def processes_and_runs(text: str) -> tuple[dict[str, str], dict[str, float]]:
    """Components by process (antler_process_info), and runs finished by process."""
    components: dict[str, str] = {}
    finished_runs: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "antler_process_info":
                components[sample.labels["process"]] = sample.labels["components"]
            elif sample.name == "antler_runs_finished_total":
                process = sample.labels["process"]
                finished_runs[process] = finished_runs.get(process, 0.0) + sample.value
    return components, finished_runs


async def test_up_serves_the_metrics_of_its_runner_and_sandbox_processes(shared_up: SharedUp) -> None:
    shared_up.model.script(Reply(text="counted", when="METRICS-RUN"))
    async with httpx.AsyncClient(base_url=shared_up.gateway, timeout=30) as http:
        # What the shared stack counted before (other tests' runs): this run is the difference.
        _, before = processes_and_runs((await http.get("/metrics")).text)
        body = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "METRICS-RUN"}]},
        }
        assert (await http.post("/api/runs/wait", json=body)).status_code == 200
        deadline = time.monotonic() + 60  # bounds a failure: a snapshot comes every 5 s (the default)
        while True:  # until the runner child's next snapshot has the run
            answer = await http.get("/metrics")
            assert answer.status_code == 200, answer.text
            components, runs = processes_and_runs(answer.text)
            counted = {p: n - before.get(p, 0.0) for p, n in runs.items() if n > before.get(p, 0.0)}
            if counted or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    assert sorted(components.values()).count("runner") == 2, components
    assert "sandbox" in components.values()
    [main] = [c for c in components.values() if "gateway" in c.split(",")]
    assert not {"runner", "sandbox"} & set(main.split(",")), "its children's components are theirs"
    assert counted, f"no runner counted the run: {runs}"
    assert {components[p] for p in counted} == {"runner"}, "counted in the runner child that ran it"
