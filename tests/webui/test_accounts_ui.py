"""Signing in with an account in the web UI: the first admin, signing out and in, CSRF-checked work."""

from __future__ import annotations

from playwright.async_api import expect

from tests.fakes.openai_server import Reply
from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS

PASSWORD = "correct horse battery"


async def test_the_first_admin_is_made_in_the_page_then_signs_out_and_in_and_chats(
    open_page: OpenPage, stack: Stack
) -> None:
    page = await open_page(user=None)
    form = page.locator(".signin-box")
    # no account yet (tokens configured): the first screen leads with creating the admin
    await expect(form.get_by_role("heading")).to_have_text("Create the admin account")
    await expect(form.get_by_role("button", name="Use an access token")).to_be_visible()
    await form.get_by_label("Email").fill("lead@example.com")
    await form.get_by_label("Password").fill(PASSWORD)
    await form.get_by_role("button", name="Create account").click()
    await expect(page.locator("#app")).to_be_visible()

    await page.locator("#sign-out").click()
    form = page.locator(".signin-box")
    await expect(form.get_by_label("Email")).to_be_visible()  # accounts exist: email first
    await form.get_by_label("Email").fill("lead@example.com")
    await form.get_by_label("Password").fill("wrong password!")
    await form.get_by_role("button", name="Sign in").click()
    await expect(form.locator(".error")).not_to_be_empty()
    await form.get_by_label("Password").fill(PASSWORD)
    await form.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#app")).to_be_visible()

    # Starting a run is a state-changing request: it passes the gateway's CSRF check.
    stack.model.script(Reply(text="Signed in and answering."))
    await send(page, "hello as an account")
    await expect(page.locator(".msg-ai .md")).to_have_text("Signed in and answering.")
    await page.reload()
    await expect(page.locator("#app")).to_be_visible()  # the session cookie keeps us in
    await expect(page.locator(".signin-box")).to_have_count(0)
