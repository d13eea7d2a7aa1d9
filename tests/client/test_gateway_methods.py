"""The client's gateway-equivalent methods against an Antler of its own (`AsyncClient.embedded`),
checked in DeerFlow's manner: every dict a method returns is parsed through the gateway's own
response model and must come back unchanged, so the two cannot drift; where the gateway answers
the same question over HTTP, the client's answer is the gateway's.

One embedded Antler for the module (its own config and data dir: these tests change MCP servers,
skills and memory, which the shared stack's other tests must not see).
"""

from __future__ import annotations

import io
import uuid
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from antler.client import AsyncClient, InvalidRequest, NotFound
from gateway.rest.files import UploadDeleted, UploadList, UploadResponse
from gateway.rest.mcp import McpConfigAnswer
from gateway.rest.memory import MemoryConfigAnswer
from gateway.rest.models import ModelInfo, ModelsList
from gateway.rest.skills import SkillInfo, SkillInstalled, SkillsList
from gateway.schemas import Thread
from tests.client.conftest import conforms
from tests.fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("client-embedded")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(model: FakeOpenAI) -> AsyncIterator[AsyncClient]:
    config = {
        "models": [
            {
                "name": "fake",
                "display_name": "Fake",
                "model": "fake-1",
                "api_key": "sk-test",
                "base_url": model.base_url,
            }
        ],
        "runner": {"processes": 1},
        "memory": {"debounce_seconds": 0.5},
    }
    async with AsyncClient.embedded(config) as antler:
        yield antler
    assert antler.embedded_dir is not None
    assert not antler.embedded_dir.exists()  # its temporary directory went with it


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(client: AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    assert client.embedded_dir is not None
    url = (client.embedded_dir / ".antler" / "gateway.url").read_text(encoding="utf-8").strip()
    async with httpx.AsyncClient(base_url=f"{url}/api", timeout=60) as http:
        yield http


async def test_an_embedded_antler_answers_a_chat(client: AsyncClient) -> None:
    assert await client.chat("hello embedded") == "You said: hello embedded"


async def test_models_are_the_gateways(client: AsyncClient, gateway: httpx.AsyncClient) -> None:
    models = await client.list_models()
    conforms(ModelsList, models)
    assert models == (await gateway.get("/models")).json()
    one = await client.get_model("fake")
    assert one is not None
    conforms(ModelInfo, one)
    assert one["display_name"] == "Fake"
    assert await client.get_model("no-such-model") is None


async def test_mcp_servers_are_read_and_replaced(client: AsyncClient, gateway: httpx.AsyncClient) -> None:
    servers = {
        "files": {"enabled": False, "type": "stdio", "command": "true", "args": [], "description": "off"}
    }
    changed = await client.update_mcp_config(servers)
    conforms(McpConfigAnswer, changed)
    assert changed["mcp_servers"] == servers

    read = await client.get_mcp_config()
    conforms(McpConfigAnswer, read)
    assert read["mcp_servers"] == servers
    assert (await gateway.get("/mcp/config")).json()["mcp_servers"] == servers  # the same file
    with pytest.raises(InvalidRequest, match="mcp_servers"):
        await client.update_mcp_config({"files": "not settings"})  # type: ignore[dict-item]


def skill_archive(path: Path, name: str) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            f"{name}/SKILL.md", f"---\nname: {name}\ndescription: Made by a test.\n---\n# {name}\n"
        )
    path.write_bytes(buffer.getvalue())
    return path


async def test_skills_are_listed_switched_and_installed(
    client: AsyncClient, gateway: httpx.AsyncClient, tmp_path: Path
) -> None:
    listed = await client.list_skills()
    conforms(SkillsList, listed)
    assert listed == (await gateway.get("/skills")).json()
    public = listed["skills"][0]["name"]

    off = await client.update_skill(public, enabled=False)
    conforms(SkillInfo, off)
    assert off["enabled"] is False
    assert public not in {s["name"] for s in (await client.list_skills(enabled_only=True))["skills"]}
    assert (await gateway.get(f"/skills/{public}")).json()["enabled"] is False
    await client.update_skill(public, enabled=True)

    name = f"client-skill-{uuid.uuid4().hex[:6]}"
    installed = await client.install_skill(skill_archive(tmp_path / "mine.skill", name))
    conforms(SkillInstalled, installed)
    assert installed["skill_name"] == name
    mine = await client.get_skill(name)
    assert mine is not None
    conforms(SkillInfo, mine)
    assert (mine["category"], mine["editable"]) == ("custom", True)

    with pytest.raises(NotFound):
        await client.update_skill("no-such-skill", enabled=True)
    with pytest.raises(FileNotFoundError):
        await client.install_skill(tmp_path / "missing.skill")
    (tmp_path / "junk.skill").write_bytes(b"not a zip")
    with pytest.raises(InvalidRequest, match="archive"):
        await client.install_skill(tmp_path / "junk.skill")


async def test_memory_is_read_changed_and_described(client: AsyncClient, gateway: httpx.AsyncClient) -> None:
    fact = f"likes herds of deer {uuid.uuid4().hex[:6]}"
    changed = await client.create_memory_fact(fact, category="preference", confidence=0.9)
    assert fact in [f["content"] for f in changed["facts"]]

    memory = await client.get_memory()
    assert memory == (await gateway.get("/memory")).json()
    assert await client.reload_memory() == memory
    config = await client.get_memory_config()
    conforms(MemoryConfigAnswer, config)
    status = await client.get_memory_status()
    assert status == (await gateway.get("/memory/status")).json()
    conforms(MemoryConfigAnswer, status["config"])

    fact_id = next(f["id"] for f in memory["facts"] if f["content"] == fact)
    after = await client.delete_memory_fact(fact_id)
    assert fact not in [f["content"] for f in after["facts"]]


async def test_uploads_are_stored_listed_and_deleted(
    client: AsyncClient, gateway: httpx.AsyncClient, tmp_path: Path
) -> None:
    thread_id = str(uuid.uuid4())
    first, second = tmp_path / "a.txt", tmp_path / "b.csv"
    first.write_text("alpha", encoding="utf-8")
    second.write_text("x,y\n1,2\n", encoding="utf-8")

    uploaded = await client.upload_files(thread_id, [first, second])
    conforms(UploadResponse, uploaded)
    again = await client.upload_files(thread_id, [str(first)])
    assert again["files"][0]["filename"] == "a_1.txt"  # a taken name gets a suffix

    listed = await client.list_uploads(thread_id)
    conforms(UploadList, listed)
    assert listed == (await gateway.get(f"/threads/{thread_id}/uploads/list")).json()
    assert [f["filename"] for f in listed["files"]] == ["a.txt", "a_1.txt", "b.csv"]

    content, mime = await client.get_artifact(thread_id, "mnt/user-data/uploads/b.csv")
    assert (content, mime) == (b"x,y\n1,2\n", "text/csv")

    deleted = await client.delete_upload(thread_id, "a.txt")
    conforms(UploadDeleted, deleted)
    assert (await client.list_uploads(thread_id))["count"] == 2
    with pytest.raises(FileNotFoundError):
        await client.delete_upload(thread_id, "a.txt")
    with pytest.raises(FileNotFoundError):
        await client.get_artifact(thread_id, "/mnt/user-data/outputs/none.txt")
    with pytest.raises(InvalidRequest, match="directory"):
        await client.upload_files(thread_id, [tmp_path])
    with pytest.raises(FileNotFoundError):
        await client.upload_files(thread_id, [tmp_path / "missing.txt"])
    with pytest.raises(InvalidRequest, match=r"\.\."):
        await client.get_artifact(thread_id, "mnt/user-data/outputs/../../etc/passwd")


async def test_threads_are_listed_read_and_deleted(client: AsyncClient, gateway: httpx.AsyncClient) -> None:
    await client.chat("a thread to list")
    thread_id = client.last_thread_id
    assert thread_id is not None

    thread = await client.get_thread(thread_id)
    conforms(Thread, thread)
    http = (await gateway.get(f"/threads/{thread_id}")).json()
    assert thread["values"]["messages"] == http["values"]["messages"]
    listed = await client.list_threads(limit=100)
    for item in listed:
        conforms(Thread, item)
    assert thread_id in [t["thread_id"] for t in listed]

    await client.delete_thread(thread_id)
    with pytest.raises(NotFound):
        await client.get_thread(thread_id)
    assert (await gateway.get(f"/threads/{thread_id}")).status_code == 404
