"""Files in the web UI: uploads by picker and drag-and-drop (before the first message), artifacts."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS


def tiny_png() -> bytes:
    """A real 2x2 red PNG, so the browser can decode and show it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


REPORT = "# Herd report\n\nTwelve deer."


async def test_a_file_picked_in_a_new_chat_is_uploaded_and_the_agent_reads_it(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/notes.txt"})]),
        Reply(text="Your notes count twelve deer."),
    )
    page = await open_page()
    await page.locator("#file-input").set_input_files(
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"The herd: twelve deer."}]
    )
    await expect(page.locator("#attachments .chip")).to_contain_text(["notes.txt"])
    await send(page, "what do my notes say?")
    # the bubble shows the words and the file; the agent read the file from its uploads
    await expect(page.locator(".msg-human .plain")).to_have_text("what do my notes say?")
    await expect(page.locator(".msg-human .chip")).to_have_text(["notes.txt"])
    step = page.locator(".step[data-tool=read_file]")
    await expect(step).to_have_class("step step-done")
    await step.locator("summary").click()
    await expect(step.locator(".step-io").last).to_have_text("The herd: twelve deer.")
    await expect(page.locator(".msg-ai .md")).to_have_text("Your notes count twelve deer.")
    told = [m for m in stack.model.agent_requests[-2]["messages"] if m["role"] == "user"]
    assert any("/mnt/user-data/uploads/notes.txt" in str(m.get("content")) for m in told)


async def test_a_file_dropped_on_a_new_chat_is_attached_and_uploaded(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/dropped.csv"})]),
        Reply(text="Lisbon is at 21."),
    )
    page = await open_page()
    files = await page.evaluate_handle(
        """() => { const dt = new DataTransfer();
                   dt.items.add(new File(['city,temp\\nLisbon,21\\n'], 'dropped.csv', {type: 'text/csv'}));
                   return dt; }"""
    )
    await page.dispatch_event("#chat-view", "dragenter", {"dataTransfer": files})
    await expect(page.locator("#drop")).to_be_visible()
    await page.dispatch_event("#chat-view", "drop", {"dataTransfer": files})
    await expect(page.locator("#drop")).to_be_hidden()
    await expect(page.locator("#attachments .chip")).to_contain_text(["dropped.csv"])
    await send(page, "how warm is it?")
    step = page.locator(".step[data-tool=read_file]")
    await step.locator("summary").click()
    await expect(step.locator(".step-io").last).to_have_text("city,temp\nLisbon,21\n")
    await expect(page.locator(".msg-ai .md")).to_have_text("Lisbon is at 21.")


async def test_artifacts_preview_and_download_and_uploaded_images_preview(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    report = "/mnt/user-data/outputs/report.md"
    stack.model.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": report, "content": REPORT})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [report]})]),
        Reply(text="Here is your report."),
    )
    page = await open_page()
    await page.locator("#file-input").set_input_files(
        files=[{"name": "deer.png", "mimeType": "image/png", "buffer": tiny_png()}]
    )
    await send(page, "write me a report")
    await expect(page.locator(".msg-ai .md")).to_have_text("Here is your report.")
    # The count is what the panel lists: the agent's report and the uploaded picture.
    await expect(page.locator("#artifact-count")).to_have_text("2")
    await page.locator("#open-artifacts").click()
    panel = page.locator("#artifacts")
    await expect(panel.locator(".artifact")).to_have_count(2)
    # the newest artifact opens at once, rendered as Markdown
    await expect(panel.locator(".preview-doc h1")).to_have_text("Herd report")
    await page.screenshot(path=screenshots / "files-desktop.png")
    async with page.expect_download() as waiting:
        await panel.locator(".preview-head").get_by_role("button", name="Download").click()
    download = await waiting.value
    assert download.suggested_filename == "report.md"
    saved = await download.path()
    assert await asyncio.to_thread(Path(saved).read_text) == REPORT
    # the uploaded picture previews as an image the browser decoded
    uploaded = panel.locator(".artifact", has_text="deer.png")
    await uploaded.get_by_role("button", name="deer.png", exact=True).click()
    image = panel.locator(".preview-img")
    await expect(image).to_be_visible()
    assert await image.evaluate("img => img.complete && img.naturalWidth") == 2

    # Another file from the agent while the panel is open: the count and the panel follow at once.
    more = "/mnt/user-data/outputs/more.md"
    stack.model.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": more, "content": "# More"})], when="one more"),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [more]})]),
        Reply(text="And one more."),
    )
    await send(page, "one more")
    await expect(page.locator(".msg-ai .md").last).to_have_text("And one more.")
    await expect(page.locator("#artifact-count")).to_have_text("3")
    await expect(panel.locator(".artifact")).to_have_count(3)
    await page.screenshot(path=screenshots / "firsthour-files-count.png")
