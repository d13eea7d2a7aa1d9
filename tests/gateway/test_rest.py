"""DeerFlow's REST API on the gateway: models, MCP, skills, memory, suggestions, messages, health."""

from __future__ import annotations

import asyncio
import io
import json
import os
import zipfile
from pathlib import Path

import httpx
import pytest

from bus import Bus
from bus.files import list_objects
from bus.messages import MemoryDocument, MemoryFact
from bus.records import RecordStore
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = pytest.mark.asyncio


async def test_models_are_listed_without_secrets(http: httpx.AsyncClient) -> None:
    listed = await http.get("/models")
    assert listed.json() == {
        "models": [
            {
                "name": "fake",
                "display_name": None,
                "description": None,
                "model": "fake-1",
                "supports_thinking": False,
                "supports_reasoning_effort": False,
                "supports_vision": False,
            }
        ]
    }
    assert "sk-test" not in listed.text
    assert (await http.get("/models/fake")).json()["name"] == "fake"
    assert (await http.get("/models/nope")).status_code == 404


async def test_mcp_config_is_written_atomically_with_secrets_as_references(http: httpx.AsyncClient) -> None:
    servers = {
        "github": {
            "enabled": True,
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "$GITHUB_TOKEN"},
            "description": "GitHub",
        }
    }
    put = await http.put("/mcp/config", json={"mcp_servers": servers})
    assert put.status_code == 200, put.text
    assert (await http.get("/mcp/config")).json()["mcp_servers"] == servers
    for _ in range(200):  # the runner tries it at once, and says why it could not start it
        status = (await http.get("/mcp/config")).json()["status"].get("github", {})
        if status:
            break
        await asyncio.sleep(0.05)
    [report] = status.values()
    assert report["ok"] is False
    assert "GITHUB_TOKEN" in report["error"]
    written = json.loads(Path(os.environ["ANTLER_EXTENSIONS_CONFIG_PATH"]).read_text())  # noqa: ASYNC240
    assert written["mcpServers"]["github"]["env"] == {"GITHUB_TOKEN": "$GITHUB_TOKEN"}
    async with httpx.AsyncClient(base_url=str(http.base_url), headers={"x-api-key": "tok-bob"}) as bob:
        refused = await bob.put("/mcp/config", json={"mcp_servers": {"evil": {"command": "sh"}}})
        assert refused.status_code == 403, "commands on the servers are an admin's to choose"
        oauth = {"token_url": "http://x", "client_secret": "s3cret"}
        await http.patch(
            "/mcp/config", json={"mcp_servers": {"api": {"type": "http", "url": "http://x", "oauth": oauth}}}
        )
        seen = (await bob.get("/mcp/config")).json()["mcp_servers"]
        assert seen["api"]["oauth"]["client_secret"] == "***", "written secrets are not shown to others"
        assert seen["github"]["env"] == {"GITHUB_TOKEN": "$GITHUB_TOKEN"}, "references are not secrets"
        await http.patch("/mcp/config", json={"mcp_servers": {"api": None}})
    bad = await http.put("/mcp/config", json={"mcp_servers": {"x": {"type": "smoke-signals"}}})
    assert bad.status_code == 422
    assert "x.type" in bad.json()["detail"]
    assert (await http.get("/mcp/config")).json()["mcp_servers"] == servers, "a bad update changes nothing"


SECRETS = ["tok-in-arg", "key-after-flag", "pat-in-env-arg", "ghp_positional", "url-pass", "q-token",
           "env-value", "header-value", "oauth-secret", "arg-url-pass"]  # fmt: skip


async def test_mcp_secrets_are_hidden_from_non_admins_in_every_field(http: httpx.AsyncClient) -> None:
    servers = {
        "tools": {
            "enabled": False,
            "command": "docker",
            "args": [
                "run", "--token=tok-in-arg", "--api-key", "key-after-flag", "-e", "GITHUB_PAT=pat-in-env-arg",
                "ghp_positional", "--upstream", "https://me:arg-url-pass@up.example/", "--api-key", "$KEY",
            ],
            "env": {"SLACK_TOKEN": "env-value", "HOME_REF": "$HOME_REF"},
        },
        "remote": {
            "type": "http",
            "url": "http://robot:url-pass@127.0.0.1:9/mcp?token=q-token&team=blue",
            "headers": {"X-Custom": "header-value"},
            "oauth": {"token_url": "http://127.0.0.1:9/token", "client_secret": "oauth-secret"},
        },
    }  # fmt: skip
    assert (await http.put("/mcp/config", json={"mcp_servers": servers})).status_code == 200
    for _ in range(200):  # the runner tries the remote server at once and reports how it went
        if (await http.get("/mcp/config")).json()["status"].get("remote"):
            break
        await asyncio.sleep(0.05)
    admin_view = (await http.get("/mcp/config")).json()["mcp_servers"]
    assert admin_view == servers, "an admin sees what was written"
    async with httpx.AsyncClient(base_url=str(http.base_url), headers={"x-api-key": "tok-bob"}) as bob:
        answer = await bob.get("/mcp/config")
    assert answer.status_code == 200
    leaked = [secret for secret in SECRETS if secret in answer.text]
    assert leaked == [], f"bob sees {leaked}"
    seen = answer.json()["mcp_servers"]
    assert seen["tools"]["args"][:4] == ["run", "--token=***", "--api-key", "***"]
    assert seen["tools"]["args"][-2:] == ["--api-key", "$KEY"], "a reference is not a secret"
    assert seen["tools"]["env"] == {"SLACK_TOKEN": "***", "HOME_REF": "$HOME_REF"}
    assert seen["remote"]["url"] == "http://***@127.0.0.1:9/mcp?token=***&team=blue"
    assert seen["remote"]["oauth"]["token_url"] == "http://127.0.0.1:9/token"


def skill_archive(name: str, *, unsafe: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{name}/SKILL.md", f"---\nname: {name}\ndescription: Make slides\n---\nDo it.\n")
        archive.writestr(f"{name}/scripts/build.py", "print('slides')\n")
        if unsafe:
            archive.writestr("../../escape.txt", "gotcha")
    return buffer.getvalue()


async def test_skills_list_toggle_and_install(http: httpx.AsyncClient, stack_config: object) -> None:
    listed = (await http.get("/skills")).json()["skills"]
    assert [(s["name"], s["enabled"], s["category"]) for s in listed] == [("deep-research", True, "public")]
    off = await http.put("/skills/deep-research", json={"enabled": False})
    assert off.json()["enabled"] is False
    assert (await http.get("/skills/deep-research")).json()["enabled"] is False

    installed = await http.post(
        "/skills/install", files={"file": ("slides.skill", skill_archive("slides"), "application/zip")}
    )
    assert installed.json() == {"success": True, "skill_name": "slides", "message": "installed skill slides"}
    names = {s["name"]: s["category"] for s in (await http.get("/skills")).json()["skills"]}
    assert names == {"deep-research": "public", "slides": "custom"}
    unsafe = await http.post(
        "/skills/install",
        files={"file": ("evil.skill", skill_archive("evil", unsafe=True), "application/zip")},
    )
    assert unsafe.status_code == 400
    assert "a path leaving its folder: ../../escape.txt" in unsafe.json()["detail"]
    not_zip = await http.post("/skills/install", files={"file": ("x.skill", b"not a zip", "application/zip")})
    assert not_zip.status_code == 400


async def test_a_skill_the_agent_wrote_into_a_thread_is_installed_by_its_path(
    http: httpx.AsyncClient, bus: Bus
) -> None:
    """DeerFlow's UI installs a .skill file the agent made: JSON {thread_id, path}."""
    from bus.files import output_key

    thread = (await http.post("/threads", json={})).json()["thread_id"]
    store = await bus.files()
    await store.put(output_key("ana", thread, "charts.skill"), skill_archive("charts"))
    body = {"thread_id": thread, "path": "/mnt/user-data/outputs/charts.skill"}
    installed = await http.post("/skills/install", json=body)
    assert installed.json()["skill_name"] == "charts", installed.text
    assert "charts" in {s["name"] for s in (await http.get("/skills")).json()["skills"]}
    missing = await http.post("/skills/install", json={**body, "path": "/mnt/user-data/outputs/none.skill"})
    assert missing.status_code == 404
    outside = await http.post("/skills/install", json={**body, "path": "/etc/passwd"})
    assert outside.status_code == 400
    assert (
        await http.post("/skills/install", json={"thread_id": "nope-x", "path": body["path"]})
    ).status_code == 404


async def test_memory_is_per_user_in_deerflows_shape(http: httpx.AsyncClient, api_url: str, bus: Bus) -> None:
    assert (await http.get("/memory")).json()["facts"] == []
    store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
    doc = MemoryDocument(user_id="ana", facts=[MemoryFact(content="Likes tea")])
    doc.user.work_context.summary = "Builds agents"
    await store.put(MemoryDocument.key("ana"), doc)
    status = (await http.get("/memory/status")).json()
    assert status["data"]["user"]["workContext"]["summary"] == "Builds agents"
    assert [f["content"] for f in status["data"]["facts"]] == ["Likes tea"]
    assert status["config"]["debounce_seconds"] == 30
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        assert (await bob.get("/memory")).json()["facts"] == []
    added = await http.post("/memory/facts", json={"content": "Likes coffee"})
    assert [f["content"] for f in added.json()["facts"]] == ["Likes tea", "Likes coffee"]


async def test_suggestions_come_from_the_model_even_in_rich_content(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    fake_model.script(Reply(text='```json\n["How fast is it?", "What does it cost?"]\n```'))
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Tell me about trains"}]}],
        "n": 2,
    }
    response = await http.post(f"/threads/{thread}/suggestions", json=body)
    assert response.json() == {"suggestions": ["How fast is it?", "What does it cost?"]}
    assert "Tell me about trains" in fake_model.agent_requests[-1]["messages"][0]["content"]


async def test_thread_messages_and_token_usage(http: httpx.AsyncClient, fake_model: FakeOpenAI) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    body = {
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": "count my tokens"}]},
    }
    await http.post(f"/threads/{thread}/runs/wait", json=body)
    messages = (await http.get(f"/threads/{thread}/messages")).json()
    assert [m["type"] for m in messages["data"]] == ["human", "ai"]
    usage = (await http.get(f"/threads/{thread}/token-usage")).json()
    assert usage["runs"] == usage["total_runs"] == 1
    assert usage["total_tokens"] == usage["total_input_tokens"] + usage["total_output_tokens"] > 0
    assert usage["by_model"] == {"fake": {"tokens": usage["total_tokens"], "runs": 1}}
    assert usage["by_caller"] == {"lead_agent": usage["total_tokens"], "subagent": 0, "middleware": 0}


async def test_deleting_a_thread_removes_its_files(http: httpx.AsyncClient, bus: Bus) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    await http.post(f"/threads/{thread}/uploads", files=[("files", ("a.txt", b"x", "text/plain"))])
    assert (await http.delete(f"/threads/{thread}")).status_code == 204
    assert (await http.get(f"/threads/{thread}/uploads/list")).status_code == 404
    names = [i.name for i in await list_objects(await bus.files())]
    assert not [n for n in names if f"/{thread}/" in n]


async def test_health_reports_the_components_that_answer(api_url: str) -> None:
    async with httpx.AsyncClient(base_url=api_url) as http:
        health = (await http.get("/health")).json()
    assert health["status"] == "ok"
    assert health["nats"] is True
    assert health["components"] == {"gateway": 1, "runner": 1, "sandbox": 1, "memory": 1, "scheduler": 1}


async def test_health_is_503_while_the_bus_is_gone(tmp_path: Path, stack_config: AppConfig) -> None:
    from bus import EmbeddedServer
    from tests.support.gateway import running_gateway

    server = EmbeddedServer(tmp_path / "own-nats")
    await server.start()
    try:
        async with (
            running_gateway(server.url, stack_config) as base,
            httpx.AsyncClient(base_url=base) as http,
        ):
            assert (await http.get("/health")).json()["status"] == "degraded", "no runner here"
            await server.stop()
            gone = await http.get("/health")
            assert gone.status_code == 503
            assert gone.json() == {
                "status": "unavailable",
                "nats": False,
                "components": {},
                "unhealthy": {},
                "degraded": {},
            }
    finally:
        await server.stop()


async def test_what_deerflows_ui_asks_before_a_new_chat(http: httpx.AsyncClient, api_url: str) -> None:
    """A new chat with an attachment uploads to its new thread id first; the UI reads limits and
    features on the way."""
    limits = (await http.get("/threads/brand-new/uploads/limits")).json()
    assert limits == {"max_files": 50, "max_file_size": 1024 * 1024, "max_total_size": 1024 * 1024}
    uploaded = await http.post(
        "/threads/brand-new/uploads", files=[("files", ("a.txt", b"hi", "text/plain"))]
    )
    assert uploaded.status_code == 200, uploaded.text
    thread = (await http.get("/threads/brand-new")).json()
    assert thread["thread_id"] == "brand-new"
    found = (await http.post("/threads/search", json={"select": ["thread_id", "values"]})).json()
    assert found == [{"thread_id": "brand-new", "values": {}}], "only the selected fields"
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        theirs = await bob.post(
            "/threads/brand-new/uploads", files=[("files", ("b.txt", b"x", "text/plain"))]
        )
        assert theirs.status_code == 404, "another user's thread is not found, nor taken over"
    assert (await http.get("/features")).json()["agents_api"] == {"enabled": True}
    assert (await http.get("/suggestions/config")).json() == {"enabled": True, "max_suggestions": 10}


async def test_thread_messages_come_in_pages_numbered_through_the_thread(http: httpx.AsyncClient) -> None:
    """DeerFlow's UI loads a thread's history newest page first and pages back by `before_seq`."""
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    runs = []
    for text in ("first question", "second question"):
        body = {"input": {"messages": [{"role": "user", "content": text}]}}
        waited = await http.post(f"/threads/{thread}/runs/wait", json=body)
        runs.append(waited.headers["location"].split("/")[-2])

    newest = (await http.get(f"/threads/{thread}/messages/page", params={"limit": 3})).json()
    assert [row["seq"] for row in newest["data"]] == [2, 3, 4]
    assert [row["content"]["type"] for row in newest["data"]] == ["ai", "human", "ai"]
    assert newest["data"][1]["content"]["content"] == "second question"
    assert [row["run_id"] for row in newest["data"]] == [runs[0], runs[1], runs[1]]
    assert all(row["metadata"]["caller"] == "lead_agent" and row["created_at"] for row in newest["data"])
    assert (newest["has_more"], newest["next_before_seq"]) == (True, 2)

    older = (await http.get(f"/threads/{thread}/messages/page", params={"before_seq": 2})).json()
    assert [(row["seq"], row["run_id"]) for row in older["data"]] == [(1, runs[0])]
    assert older["data"][0]["content"]["content"] == "first question"
    assert (older["has_more"], older["next_before_seq"]) == (False, None)

    forwards = await http.get(f"/threads/{thread}/messages/page", params={"after_seq": 1})
    assert forwards.status_code == 422
    assert "after_seq" in forwards.json()["detail"]
