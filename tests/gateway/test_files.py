"""Uploads (with Markdown conversion) and artifacts over HTTP, scoped per user."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bus import Bus
from bus.files import list_objects, output_key
from config import AppConfig
from tests.fakes.documents import docx, pdf
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced

pytestmark = pytest.mark.asyncio


async def new_thread(http: httpx.AsyncClient) -> str:
    return str((await http.post("/threads", json={})).json()["thread_id"])


async def test_office_documents_get_markdown_siblings(http: httpx.AsyncClient) -> None:
    thread = await new_thread(http)
    files = [
        (
            "files",
            ("Quarterly Report.docx", docx("Revenue grew by forty percent"), "application/octet-stream"),
        ),
        ("files", ("slides.pdf", pdf("Hello from the PDF"), "application/pdf")),
        ("files", ("notes.txt", b"plain text", "text/plain")),
    ]
    response = await http.post(f"/threads/{thread}/uploads", files=files)
    assert response.status_code == 200, response.text
    uploaded = {f["filename"]: f for f in response.json()["files"]}
    assert uploaded["Quarterly Report.docx"]["markdown_file"] == "Quarterly Report.md"
    assert uploaded["slides.pdf"]["markdown_file"] == "slides.md"
    assert uploaded["notes.txt"]["markdown_file"] is None
    assert uploaded["slides.pdf"]["path"] == "/mnt/user-data/uploads/slides.pdf"

    listed = (await http.get(f"/threads/{thread}/uploads/list")).json()
    assert sorted(f["filename"] for f in listed["files"]) == [
        "Quarterly Report.docx",
        "Quarterly Report.md",
        "notes.txt",
        "slides.md",
        "slides.pdf",
    ]
    report_md = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/uploads/Quarterly Report.md")
    assert "Revenue grew by forty percent" in report_md.text
    slides_md = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/uploads/slides.md")
    assert "Hello from the PDF" in slides_md.text


async def test_unsafe_and_duplicate_names_are_made_safe(http: httpx.AsyncClient) -> None:
    thread = await new_thread(http)
    files = [
        ("files", ("../../etc/passwd", b"one", "text/plain")),
        ("files", ("a.txt", b"first", "text/plain")),
        ("files", ("a.txt", b"second", "text/plain")),
    ]
    names = [
        f["filename"] for f in (await http.post(f"/threads/{thread}/uploads", files=files)).json()["files"]
    ]
    assert names == ["passwd", "a.txt", "a_1.txt"]
    again = await http.post(
        f"/threads/{thread}/uploads", files=[("files", ("a.txt", b"third", "text/plain"))]
    )
    assert again.json()["files"][0]["filename"] == "a_2.txt", "earlier uploads are never overwritten"
    assert (await http.delete(f"/threads/{thread}/uploads/a.txt")).json()["success"] is True
    assert (await http.delete(f"/threads/{thread}/uploads/a.txt")).status_code == 404


async def test_an_uploaded_file_is_visible_to_the_agent(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    thread = await new_thread(http)
    await http.post(
        f"/threads/{thread}/uploads", files=[("files", ("data.csv", b"city,temp\nLisbon,21\n", "text/csv"))]
    )
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/data.csv"})]),
        Reply(text="Lisbon is at 21 degrees."),
    )
    body = {
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": "what is in my csv?"}]},
    }
    result = (await http.post(f"/threads/{thread}/runs/wait", json=body)).json()
    tool_result = next(m for m in result["messages"] if m["type"] == "tool")
    assert tool_result["content"] == "city,temp\nLisbon,21\n"


async def test_artifacts_are_served_with_their_type_and_active_content_as_attachments(
    http: httpx.AsyncClient, bus: Bus
) -> None:
    thread = await new_thread(http)
    store = await bus.files()
    from nats.js.api import ObjectMeta

    for name, data, kind in [
        ("page.html", b"<script>alert(1)</script>", "text/html"),
        ("chart.png", b"\x89PNG fake", "image/png"),
    ]:
        key = output_key("ana", thread, name)
        await store.put(key, data, meta=ObjectMeta(name=key, headers={"Content-Type": kind}))
    page = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/outputs/page.html")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-disposition"] == 'attachment; filename="page.html"'
    chart = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/outputs/chart.png")
    assert chart.headers["content-type"] == "image/png"
    assert "content-disposition" not in chart.headers
    assert chart.content == b"\x89PNG fake"
    forced = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/outputs/chart.png?download=true")
    assert forced.headers["content-disposition"].startswith("attachment")


async def test_bad_file_requests_get_clear_4xx(http: httpx.AsyncClient, api_url: str) -> None:
    thread = await new_thread(http)
    traversal = await http.get(f"/threads/{thread}/artifacts/mnt/user-data/outputs/%2E%2E/%2E%2E/secret")
    assert traversal.status_code in (400, 404)
    assert (await http.get(f"/threads/{thread}/artifacts/etc/passwd")).status_code == 404
    assert (
        await http.get(f"/threads/{thread}/artifacts/mnt/user-data/outputs/missing.md")
    ).status_code == 404
    assert (
        await http.post("/threads/no.pe/uploads", files=[("files", ("a.txt", b"x", "text/plain"))])
    ).status_code == 404, "an id no thread can have"
    big = b"x" * (1024 * 1024 + 1)  # the test gateway allows 1 MB
    too_big = await http.post(
        f"/threads/{thread}/uploads", files=[("files", ("big.bin", big, "application/zip"))]
    )
    assert too_big.status_code == 413
    assert too_big.json()["detail"] == "big.bin is larger than 1 MB"
    assert (await http.get(f"/threads/{thread}/uploads/list")).json()["count"] == 0, "nothing half-stored"


async def test_other_users_cannot_read_uploads_or_artifacts(api_url: str, http: httpx.AsyncClient) -> None:
    thread = await new_thread(http)
    await http.post(
        f"/threads/{thread}/uploads", files=[("files", ("private.txt", b"ana only", "text/plain"))]
    )
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        assert (await bob.get(f"/threads/{thread}/uploads/list")).status_code == 404
        assert (
            await bob.get(f"/threads/{thread}/artifacts/mnt/user-data/uploads/private.txt")
        ).status_code == 404
        up = await bob.post(f"/threads/{thread}/uploads", files=[("files", ("x.txt", b"x", "text/plain"))])
        assert up.status_code == 404


async def _until_gone(path: Path) -> None:
    """The broker removes a deleted thread's directory when it hears of the deletion (an event)."""
    for _ in range(400):
        if not await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{path} is still there after its thread was deleted")


async def test_a_deleted_threads_files_are_gone_everywhere_and_its_id_starts_empty(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, bus: Bus, stack_config: AppConfig
) -> None:
    thread = "reused-id"  # clients choose ids, so one can come back
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "work"}]}}
    assert (await http.post("/threads", json={"thread_id": thread})).status_code == 200
    await http.post(f"/threads/{thread}/uploads", files=[("files", ("old.txt", b"old upload", "text/plain"))])
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("bash", {"command": "echo s > secret.txt; cp ../uploads/old.txt ../outputs/"})
            ]
        ),
        Reply(text="Done."),
    )
    await http.post(f"/threads/{thread}/runs/wait", json=body)
    on_disk = Path(stack_config.bus.data_dir) / "sandbox" / "users" / "ana" / "threads" / thread
    assert (on_disk / "user-data" / "workspace" / "secret.txt").is_file()
    assert (on_disk / "user-data" / "outputs" / "old.txt").is_file()

    assert (await http.delete(f"/threads/{thread}")).status_code == 204
    await _until_gone(on_disk)
    assert (await http.post("/threads", json={"thread_id": thread})).status_code == 200
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "find /mnt/user-data -type f | sort; echo end"})]),
        Reply(text="Nothing here."),
    )
    await http.post(f"/threads/{thread}/runs/wait", json=body)
    assert unfenced(fake_model.agent_requests[-1]["messages"][-1]["content"]).strip() == "end"
    assert (await http.get(f"/threads/{thread}/uploads/list")).json()["files"] == []
    names = [i.name for i in await list_objects(await bus.files())]
    runs = (await http.get(f"/threads/{thread}/runs")).json()
    kept = {f"journals/ana/{thread}/{run['run_id']}.json" for run in runs}  # the new thread's own run
    assert len(runs) == 1
    assert not [n for n in names if f"/{thread}/" in n and n not in kept], "nothing of the deleted thread"
    messages = (await http.get(f"/threads/{thread}/messages")).json()["data"]
    assert [m["content"] for m in messages if m["type"] == "ai" and m["content"]] == ["Nothing here."]
