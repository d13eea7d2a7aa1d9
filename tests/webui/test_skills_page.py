"""The Skills settings page: install, read, edit and delete a custom skill; non-admins are told no."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import httpx
from playwright.async_api import expect

from tests.webui.conftest import UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS

MANIFEST = "---\nname: antler-count\ndescription: Count antler tines\n---\nCount each tine once.\n"


def api(stack: Stack, token: str = "tok-ana") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": token}, timeout=30)


def archive() -> dict[str, object]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("antler-count/SKILL.md", MANIFEST)
    return {"name": "antler-count.skill", "mimeType": "application/zip", "buffer": buffer.getvalue()}


async def test_an_admin_installs_reads_edits_and_deletes_a_skill_and_a_user_may_only_read_it(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    page = await open_page(user="ana", path="/#/settings/skills")
    body = page.locator("#settings-body")
    await body.locator("input[type=file]").set_input_files(files=[archive()])
    card = body.locator("[data-skill=antler-count]")
    await expect(card).to_contain_text("Count antler tines")
    await expect(card.locator(".badge")).to_have_text("custom")
    # a built-in skill can be read, not edited or deleted
    public = body.locator("[data-skill=deep-research]")
    await expect(public.get_by_role("button", name="Edit deep-research")).to_have_count(0)
    await public.get_by_role("button", name="View deep-research").click()
    await expect(public.get_by_label("deep-research SKILL.md")).to_contain_text("name: deep-research")

    await card.get_by_role("button", name="View antler-count").click()
    await expect(card.get_by_label("antler-count SKILL.md")).to_contain_text("Count each tine once.")
    await card.get_by_role("button", name="Edit antler-count").click()
    editor = card.get_by_label("Edit antler-count SKILL.md")
    await editor.fill(MANIFEST.replace("Count each tine once.", "Count each tine twice."))
    await card.get_by_role("button", name="Save").click()
    await expect(page.locator("#toast")).to_have_text("antler-count saved")
    await page.screenshot(path=screenshots / "settings-skills-desktop.png")
    async with api(stack) as http:
        assert "tine twice" in (await http.get("/skills/custom/antler-count")).json()["content"]
    # its versions: the install and the edit; restoring the first makes a third, current, version
    await card.get_by_role("button", name="History antler-count").click()
    versions = card.get_by_label("antler-count versions").locator("li")
    await expect(versions).to_have_count(2)
    await expect(versions.nth(1)).to_contain_text("edit by ana")
    await card.get_by_role("button", name="Restore antler-count version 1").click()
    await expect(page.locator("#toast")).to_have_text("antler-count restored")
    async with api(stack) as http:
        assert (await http.get("/skills/custom/antler-count")).json()["content"] == MANIFEST
        await http.put("/skills/custom/antler-count", json={"content": MANIFEST.replace("once", "twice")})

    # bob may read it; changing it is refused with the reason
    bobs = await open_page(user="bob", path="/#/settings/skills")
    bob_card = bobs.locator("#settings-body [data-skill=antler-count]")
    await bob_card.get_by_role("button", name="View antler-count").click()
    await expect(bob_card.get_by_label("antler-count SKILL.md")).to_contain_text("tine twice")
    await bob_card.get_by_role("button", name="Delete antler-count").click()
    await bobs.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await expect(bobs.locator("#toast")).to_contain_text("only an admin may delete a skill")

    await page.reload()
    await card.get_by_role("button", name="Delete antler-count").click()
    confirm = page.get_by_role("dialog", name="Delete the skill antler-count?")
    await confirm.get_by_role("button", name="Delete").click()
    await expect(card).to_have_count(0)
    async with api(stack) as http:
        assert [s["name"] for s in (await http.get("/skills")).json()["skills"]] == ["deep-research"]
