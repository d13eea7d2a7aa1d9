"""skill-creator end to end: the agent drafts a skill and packs it into its outputs as its SKILL.md
says, the user installs the .skill file through the gateway, and the next runner lists and reads it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import Bus
from config import AppConfig
from config.loader import _build
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.skills.conftest import SKILLS
from tests.support.gateway import running_gateway
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio

DRAFT = "/mnt/user-data/workspace/skills/weekly-report"
ARCHIVE = "/mnt/user-data/outputs/weekly-report.skill"
SKILL_MD = """---
name: weekly-report
description: Build the weekly sales report from the CRM export. Use it when the user uploads a CRM export.
license: MIT
---

# Weekly report

1. Total the export per sales rep with `python3 /mnt/skills/custom/weekly-report/scripts/totals.py FILE`.
2. Save the table in /mnt/user-data/outputs and present it.
"""


@pytest.fixture
def config(config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppConfig:
    # Installs write into <skills>/custom: a copy of the shipped skill-creator, not the repository.
    skills = tmp_path / "skills"
    shutil.copytree(SKILLS / "public" / "skill-creator", skills / "public" / "skill-creator")
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(tmp_path / "extensions_config.json"))
    data = {
        **config_data,
        "skills": {"path": str(skills)},
        "sandbox": {"provider": "local"},
        "gateway": {"port": 0, "tokens": [{"token": "tok-ana", "user_id": "ana", "admin": True}]},
    }
    return _build(AppConfig, data, "test config")


def tool_results(events: list[Any]) -> list[str]:
    return [e.data[0]["content"] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]


async def test_a_skill_the_agent_packs_is_installed_by_the_user_and_reaches_the_next_run(
    bus: Bus, fake_model: FakeOpenAI, config: AppConfig, nats_url: str
) -> None:
    package = (
        "python3 /mnt/skills/public/skill-creator/scripts/package_skill.py "
        f"{DRAFT} --out-dir /mnt/user-data/outputs"
    )
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/skills/public/skill-creator/SKILL.md"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": f"{DRAFT}/SKILL.md", "content": SKILL_MD})]),
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": f"{DRAFT}/scripts/totals.py", "content": "print('ok')\n"})
            ]
        ),
        Reply(tool_calls=[ToolCall("bash", {"command": package})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [ARCHIVE]})]),
        Reply(text="Install weekly-report.skill to use it."),
    )
    async with running_broker(nats_url, config), running_gateway(nats_url, config) as base:
        async with running_runner(nats_url, config):
            events = await submit_and_collect(
                bus, ask("t-creator", "make a skill of our weekly report", user_id="ana")
            )
        results = tool_results(events)
        assert "name: skill-creator" in results[0]
        assert f"wrote {ARCHIVE}" in results[3], results[3]
        assert [e for e in events if e.event == "values"][-1].data["artifacts"] == [ARCHIVE]

        async with httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}) as http:
            installed = await http.post("/skills/install", json={"thread_id": "t-creator", "path": ARCHIVE})
            assert installed.status_code == 200, installed.text
            assert installed.json()["skill_name"] == "weekly-report"
            listed = {s["name"]: s["category"] for s in (await http.get("/skills")).json()["skills"]}
            assert listed == {"skill-creator": "public", "weekly-report": "custom"}

        custom = "/mnt/skills/custom/weekly-report"
        fake_model.script(
            Reply(tool_calls=[ToolCall("read_file", {"path": f"{custom}/SKILL.md"})]),
            Reply(tool_calls=[ToolCall("bash", {"command": f"python3 {custom}/scripts/totals.py"})]),
            Reply(text="Here is the weekly report."),
        )
        async with running_runner(nats_url, config):
            events = await submit_and_collect(bus, ask("t-weekly", "the weekly report please", user_id="ana"))
        prompt = fake_model.agent_requests[-3]["messages"][0]["content"]
        assert "- weekly-report: Build the weekly sales report from the CRM export." in prompt
        assert f"({custom}/SKILL.md)" in prompt
        assert tool_results(events) == [SKILL_MD, "ok"]
