"""`antler up` as users run it: the gateway's /metrics serves every process's counts, its runner
and sandbox children's included, each under its own `process` label (bus.metrics_feed)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.nats_users import logged_violations


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


async def test_up_serves_the_metrics_of_its_runner_and_sandbox_processes(
    tmp_path: Path, fake_model: FakeOpenAI
) -> None:
    config = {
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": fake_model.base_url}
        ],
        "gateway": {"port": 0},
        "runner": {"processes": 2},
        "sandbox": {"provider": "local", "toolbox": {"path": "box", "python_packages": []}},
        "observability": {"metrics_interval_seconds": 0.3},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    up = await run_antler("up", cwd=tmp_path)
    try:
        assert up.stdout is not None
        lines = [(await asyncio.wait_for(up.stdout.readline(), 90)).decode() for _ in range(2)]
        gateway = next(line.split()[1] for line in lines if line.startswith("Gateway:"))
        fake_model.script(Reply(text="counted"))
        async with httpx.AsyncClient(base_url=gateway, timeout=30) as http:
            body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]}}
            assert (await http.post("/api/runs/wait", json=body)).status_code == 200
            for _ in range(200):  # until the runner child's next snapshot has the run
                answer = await http.get("/metrics")
                assert answer.status_code == 200, answer.text
                components, runs = processes_and_runs(answer.text)
                if sum(runs.values()) == 1:
                    break
                await asyncio.sleep(0.1)
        assert sorted(components.values()).count("runner") == 2, components
        assert "sandbox" in components.values()
        [main] = [c for c in components.values() if "gateway" in c.split(",")]
        assert not {"runner", "sandbox"} & set(main.split(",")), "its children's components are theirs"
        [(process, count)] = [(p, n) for p, n in runs.items() if n]
        assert (components[process], count) == ("runner", 1.0), "counted in the runner child that ran it"
    finally:
        up.send_signal(signal.SIGINT)
        code, _, err = await finished(up, 60)
        assert code == 0, err
        assert logged_violations(tmp_path / ".antler") == [], "every process may publish its metrics"
