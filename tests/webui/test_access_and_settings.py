"""Signing in, users kept apart, the settings pages, and how the gateway serves the page."""

from __future__ import annotations

import io
import re
import sys
import zipfile
from pathlib import Path

import httpx
from playwright.async_api import expect

from tests.fakes.openai_server import Reply
from tests.webui.conftest import PHONE, UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS


def api(stack: Stack, token: str = "tok-ana") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": token}, timeout=30)


async def test_the_page_is_served_at_the_root_without_shadowing_the_api(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:  # a busy machine's first answers
        page = await http.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        script = await http.get("/ui/js/app.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert (await http.get("/ui/%2e%2e/%2e%2e/%2e%2e/pyproject.toml")).status_code == 404
        assert (await http.get("/ui/nothing.js")).status_code == 404
        # the API, its docs and health answer as before: the page's files need no token, the API does
        assert (await http.get("/api/models")).status_code == 401
        assert (await http.get("/api/models", headers={"x-api-key": "tok-ana"})).status_code == 200
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/docs")).status_code == 200
        assert (await http.post("/", content=b"x")).status_code == 405


async def test_a_token_is_asked_for_once_and_kept(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    page = await open_page(user=None, size=PHONE)
    form = page.locator(".signin-box")
    await expect(form).to_be_visible()
    await page.screenshot(path=screenshots / "signin-phone.png")
    await form.get_by_role("button", name="Use an access token").click()  # no admin yet: that leads
    await form.get_by_label("Access token").fill("not-a-token")
    await form.get_by_role("button", name="Sign in").click()
    await expect(form.locator(".error")).to_have_text("That token is not known here.")
    await form.get_by_label("Access token").fill("tok-bob")
    await form.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#app")).to_be_visible()
    await page.reload()
    await expect(page.locator("#app")).to_be_visible()  # no second sign-in
    await expect(form).to_have_count(0)
    await page.locator("#open-sidebar").click()
    await page.locator("#sign-out").click()
    await expect(page.locator(".signin-box")).to_be_visible()


async def test_a_second_user_cannot_see_the_first_users_threads(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(Reply(text="Only for ana."))
    ana = await open_page(user="ana")
    await send(ana, "ana's secret plans")
    await expect(ana.locator(".msg-ai .md")).to_have_text("Only for ana.")
    await expect(ana.locator(".thread-title")).to_contain_text(["Chat about ana's secret plans"])
    thread_id = ana.url.split("#/t/", 1)[1]

    bob = await open_page(user="bob")
    await expect(bob.locator("#empty")).to_be_visible()
    await expect(bob.locator(".thread-title", has_text="secret")).to_have_count(0)
    await bob.goto(f"{stack.url}/#/t/{thread_id}")
    await expect(bob.locator("#toast")).to_contain_text("does not exist")
    await expect(bob.locator(".msg")).to_have_count(0)
    await expect(bob.get_by_text("Only for ana.")).to_have_count(0)


async def test_thread_list_search_rename_and_delete(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(Reply(text="First."), Reply(text="Second."))
    page = await open_page(user="bob")
    for text in ("about elk", "about moose"):
        await page.locator("#new-chat").click()
        await send(page, text)
        await expect(page.locator(".thread-title", has_text=text)).to_have_count(1)
    titles = page.locator(".thread-title")
    await page.locator("#thread-search").fill("moose")
    await expect(titles).to_have_text(["Chat about about moose"])
    await page.locator("#thread-search").fill("")
    await page.locator(".thread", has_text="about elk").hover()
    await page.get_by_role("button", name="Rename Chat about about elk").click()
    rename = page.locator(".thread .rename")
    await rename.fill("Elk notes")
    await rename.press("Enter")
    await expect(titles.filter(has_text="Elk notes")).to_have_count(1)
    await page.reload()  # kept by the gateway, not just the page
    await expect(titles.filter(has_text="Elk notes")).to_have_count(1)
    browser_dialogs: list[str] = []
    page.on("dialog", lambda dialog: browser_dialogs.append(dialog.message))
    await page.locator(".thread", has_text="Elk notes").hover()
    await page.get_by_role("button", name="Delete Elk notes").click()
    # asked in the page, not with the browser's confirm(); Cancel keeps the thread
    confirm = page.get_by_role("dialog", name='Delete "Elk notes"?')
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_have_count(0)
    await expect(titles.filter(has_text="Elk notes")).to_have_count(1)
    await page.locator(".thread", has_text="Elk notes").hover()
    await page.get_by_role("button", name="Delete Elk notes").click()
    await confirm.get_by_role("button", name="Delete").click()
    await expect(titles.filter(has_text="Elk notes")).to_have_count(0)
    assert browser_dialogs == []
    await expect(titles.filter(has_text="moose")).to_have_count(1)


def skill_archive(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        manifest = f"---\nname: {name}\ndescription: Track deer herds\n---\nSteps.\n"
        bundle.writestr(f"{name}/SKILL.md", manifest)
    return buffer.getvalue()


async def test_settings_pages_edit_memory_switch_skills_and_mcp_servers(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    server = {"type": "stdio", "command": "antler-no-such-mcp-server", "args": ["--x"]}
    async with api(stack) as http:
        assert (await http.put("/mcp/config", json={"mcp_servers": {"herds": server}})).status_code == 200
    page = await open_page(user="ana", path="/#/settings/memory")
    body = page.locator("#settings-body")
    # memory: add, edit, delete a fact
    await body.get_by_label("New fact").fill("Prefers red deer")
    await body.get_by_role("button", name="Add fact").click()
    fact = body.locator(".fact")
    await expect(fact).to_contain_text(["Prefers red deer"])
    await page.screenshot(path=screenshots / "settings-memory-desktop.png")
    await fact.get_by_role("button", name="Edit fact").click()
    await body.get_by_label("Fact", exact=True).fill("Prefers roe deer")
    await body.get_by_role("button", name="Save").click()
    await expect(fact).to_contain_text(["Prefers roe deer"])
    async with api(stack) as http:
        assert [f["content"] for f in (await http.get("/memory")).json()["facts"]] == ["Prefers roe deer"]
    await fact.get_by_role("button", name="Delete fact").click()
    await expect(fact).to_have_count(0)
    # skills: switch one off, install another
    await page.locator(".tabs a", has_text="Skills").click()
    switch = body.get_by_label("Enable deep-research")
    await expect(switch).to_be_checked()
    await switch.uncheck()
    await expect(page.locator("#toast")).to_have_text("deep-research disabled")
    archive = {
        "name": "herd-tracker.skill",
        "mimeType": "application/zip",
        "buffer": skill_archive("herd-tracker"),
    }
    await body.locator("input[type=file]").set_input_files(files=[archive])
    await expect(body.locator("[data-skill=herd-tracker]")).to_contain_text("Track deer herds")
    async with api(stack) as http:
        skills = {s["name"]: s["enabled"] for s in (await http.get("/skills")).json()["skills"]}
    assert skills == {"deep-research": False, "herd-tracker": True}
    # MCP servers: shown with what they run, switched off for every runner
    await page.locator(".tabs a", has_text="MCP servers").click()
    card = body.locator("[data-mcp=herds]")
    await expect(card).to_contain_text("antler-no-such-mcp-server --x")
    await card.get_by_label("Enable herds").uncheck()
    await expect(page.locator("#toast")).to_have_text("herds disabled")
    async with api(stack) as http:
        assert (await http.get("/mcp/config")).json()["mcp_servers"]["herds"]["enabled"] is False
    await expect(body).not_to_contain_text("null")
    await page.emulate_media(color_scheme="dark")
    await page.screenshot(path=screenshots / "settings-mcp-dark.png")


PROCESS_STATUS = re.compile(r"^(runner|subagent executor) on \S+ \(pid \d+\)( #\d+)?: .+")


async def test_a_failing_mcp_server_shows_which_process_and_what_it_said(
    open_page: OpenPage, stack: Stack
) -> None:
    complaint = "import sys; print('notes folder /srv/notes is missing', file=sys.stderr); sys.exit(3)"
    server = {"type": "stdio", "command": sys.executable, "args": ["-c", complaint]}
    async with api(stack) as http:
        assert (await http.put("/mcp/config", json={"mcp_servers": {"notes": server}})).status_code == 200
        try:
            page = await open_page(user="ana", path="/#/settings/mcp")
            status = page.locator("[data-mcp=notes] .status li")
            for _ in range(30):  # the runner reports once it has tried: reopen the page until it has
                if await status.count():
                    break
                await page.wait_for_timeout(500)
                await page.locator(".tabs a", has_text="Memory").click()
                await page.locator(".tabs a", has_text="MCP servers").click()
            # each process (runner, subagent executor) as a person reads it (host and pid, not
            # 'vm:22370#1'), with the server's own words, not only the client's "Connection closed"
            await expect(status.first).to_be_visible()
            for line in await status.all():
                await expect(line).to_have_class("error")
                await expect(line).to_have_text(PROCESS_STATUS)
                await expect(line).to_contain_text("notes folder /srv/notes is missing")
        finally:
            await http.put("/mcp/config", json={"mcp_servers": {}})
