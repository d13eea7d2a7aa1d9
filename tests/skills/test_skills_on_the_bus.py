"""Skills on the bus: two machines (separate data dirs and code copies, a runner and a sandbox broker
on each) share custom skills through the object store and the catalog, and nothing else."""

from __future__ import annotations

import contextlib
import io
import shutil
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import Bus
from bus.messages import ExecReply, ExecRequest
from config import AppConfig
from config.loader import _build
from tests.conftest import another_machine
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.skills.conftest import SKILLS
from tests.support.gateway import running_gateway
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio

SKILL_MD = """---
name: weekly-report
description: Build the weekly sales report from the CRM export.
---
Run `python3 /mnt/skills/custom/weekly-report/scripts/totals.py` and report its total.
"""
SCRIPT = "print('weekly total: 42')\n"
RUN_IT = "python3 /mnt/skills/custom/weekly-report/scripts/totals.py"


def weekly_report(script: str = SCRIPT) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("weekly-report/SKILL.md", SKILL_MD)
        bundle.writestr("weekly-report/scripts/totals.py", script)
    return buffer.getvalue()


def machine(config_data: dict[str, Any], data_dir: str, code: Path) -> AppConfig:
    """One machine's config: its own data dir and its own copy of Antler's code (skills.path)."""
    shutil.copytree(SKILLS / "public" / "skill-creator", code / "skills" / "public" / "skill-creator")
    data = {
        **config_data,
        "bus": {**config_data["bus"], "data_dir": data_dir},
        "skills": {"path": str(code / "skills")},
        "sandbox": {"provider": "local"},
        "gateway": {"port": 0, "tokens": [{"token": "tok-ana", "user_id": "ana", "admin": True}]},
    }
    return _build(AppConfig, data, "test config")


@pytest.fixture
def machines(
    config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[AppConfig, AppConfig]:
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(tmp_path / "extensions_config.json"))
    first = config_data["bus"]["data_dir"]
    second = another_machine(first, tmp_path / "machine-b" / "data")
    return (
        machine(config_data, first, tmp_path / "machine-a" / "code"),
        machine(config_data, second, tmp_path / "machine-b" / "code"),
    )


@contextlib.asynccontextmanager
async def worker(nats_url: str, config: AppConfig) -> AsyncIterator[None]:
    """A machine's runner and sandbox broker."""
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        yield


@contextlib.asynccontextmanager
async def admin_api(nats_url: str, config: AppConfig) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_gateway(nats_url, config) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}, timeout=30) as http,
    ):
        yield http


def system_prompt(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def tool_results(events: list[Any]) -> list[str]:
    return [e.data[0]["content"] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]


async def sandbox_ls(bus: Bus, thread: str) -> str:
    reply = await bus.request(
        bus.subjects.sandbox("exec"),
        ExecRequest(user_id="ana", thread_id=thread, command="ls /mnt/skills/custom"),
        ExecReply,
        timeout=30,
    )
    return reply.output


async def test_a_skill_installed_on_one_machine_runs_on_another_and_switching_it_off_reaches_everyone(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, machines: tuple[AppConfig, AppConfig]
) -> None:
    a, b = machines
    async with admin_api(nats_url, a) as http, worker(nats_url, a):
        installed = await http.post(
            "/skills/install", files={"file": ("w.skill", weekly_report(), "application/zip")}
        )
        assert installed.status_code == 200, installed.text

    # Machine B never saw the upload: its runner offers the skill and its sandbox runs the script.
    async with worker(nats_url, b):
        fake_model.script(
            Reply(tool_calls=[ToolCall("bash", {"command": RUN_IT})]), Reply(text="The total is 42.")
        )
        events = await submit_and_collect(bus, ask("t-b1", "/weekly-report please", user_id="ana"))
        prompt = system_prompt(fake_model.agent_requests[-2])
        assert '<active_skill name="weekly-report">' in prompt
        assert "- weekly-report: Build the weekly sales report" in prompt
        assert "weekly total: 42" in tool_results(events)[0]

        # The gateway's own copy is gone (a recreated container): the skill is still there.
        shutil.rmtree(Path(a.bus.data_dir) / "skills")
        async with admin_api(nats_url, a) as http:
            listed = {s["name"]: s["category"] for s in (await http.get("/skills")).json()["skills"]}
            assert listed == {"skill-creator": "public", "weekly-report": "custom"}
            assert (await http.get("/skills/custom/weekly-report")).json()["content"] == SKILL_MD
            switched = await http.put("/skills/weekly-report", json={"enabled": False})
            assert switched.status_code == 200, switched.text

        await submit_and_collect(bus, ask("t-b2", "hello", user_id="ana"))
        assert "weekly-report" not in system_prompt(fake_model.agent_requests[-1]), "switched off on B"
        await submit_and_collect(bus, ask("t-b3", "/weekly-report again", user_id="ana"))
        assert "<active_skill" not in system_prompt(fake_model.agent_requests[-1])


async def test_an_edit_and_a_deletion_reach_the_sandbox_of_another_machine(
    bus: Bus, nats_url: str, fake_model: FakeOpenAI, machines: tuple[AppConfig, AppConfig]
) -> None:
    a, b = machines
    async with worker(nats_url, b), admin_api(nats_url, a) as http:
        installed = await http.post(
            "/skills/install", files={"file": ("w.skill", weekly_report(), "application/zip")}
        )
        assert installed.status_code == 200, installed.text
        assert "weekly-report" in await sandbox_ls(bus, "t-ls")

        edited = await http.put(
            "/skills/custom/weekly-report", json={"content": SKILL_MD.replace("its total", "its sum")}
        )
        assert edited.status_code == 200, edited.text
        fake_model.script(
            Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/skills/custom/weekly-report/SKILL.md"})]),
            Reply(text="ok"),
        )
        events = await submit_and_collect(bus, ask("t-edit", "read it", user_id="ana"))
        assert "report its sum" in tool_results(events)[0], "machine B's sandbox has the edited version"

        history = (await http.get("/skills/custom/weekly-report/history")).json()["history"]
        assert [(h["action"], h["current"]) for h in history] == [("install", False), ("edit", True)]
        rolled = await http.post("/skills/custom/weekly-report/rollback", json={})
        assert rolled.json()["content"] == SKILL_MD

        deleted = await http.delete("/skills/custom/weekly-report")
        assert deleted.status_code == 200, deleted.text
        assert "weekly-report" not in await sandbox_ls(bus, "t-ls"), "gone from machine B's sandbox"
        assert [s["name"] for s in (await http.get("/skills")).json()["skills"]] == ["skill-creator"]


async def test_a_skill_installed_before_skills_were_on_the_bus_is_imported_once_and_deletable(
    bus: Bus, nats_url: str, machines: tuple[AppConfig, AppConfig]
) -> None:
    a, b = machines
    legacy = Path(a.skills.path) / "custom" / "weekly-report"
    (legacy / "scripts").mkdir(parents=True)
    (legacy / "SKILL.md").write_text(SKILL_MD)
    (legacy / "scripts" / "totals.py").write_text(SCRIPT)
    async with admin_api(nats_url, a) as http, running_broker(nats_url, b):
        listed = {s["name"]: s["category"] for s in (await http.get("/skills")).json()["skills"]}
        assert listed == {"skill-creator": "public", "weekly-report": "custom"}
        reply = await bus.request(
            bus.subjects.sandbox("exec"),
            ExecRequest(user_id="ana", thread_id="t-old", command=RUN_IT),
            ExecReply,
        )
        assert "weekly total: 42" in reply.output, "machine B runs the imported skill"
        assert (await http.delete("/skills/custom/weekly-report")).status_code == 200
        assert not legacy.exists(), "its old folder goes too, so no restart imports it again"
    async with admin_api(nats_url, a) as http:
        assert [s["name"] for s in (await http.get("/skills")).json()["skills"]] == ["skill-creator"]
