"""The web UI in real headless Chromium (Playwright) against the whole stack with the scripted model.

One browser per worker and one stack per test module, all on the session's event loop (where the
session's nats-server lives too); each test gets a fresh browser context (its own localStorage and
cookies). The tests run in one xdist group, so two browsers never compete for the two cores.

Screenshots go to `$ANTLER_UI_ARTIFACTS` if set, else to a `ui-screenshots` directory under
pytest's temporary directory (printed at the end of the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from config import AppConfig, BusConfig
from config.loader import _build
from tests.conftest import component_bus, fail_on_violations
from tests.fakes.openai_server import FakeOpenAI
from tests.support.gateway import running_gateway, skills_dir
from tests.support.memory import running_updater
from tests.support.module_stack import module_stack
from tests.support.nats_users import SecuredServer
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.support.schedules import running_scheduler
from tests.support.subagents import running_executor

CHROMIUM = os.environ.get("ANTLER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
TOKENS = {"ana": "tok-ana", "bob": "tok-bob"}

# A shared machine may be slow: waiting longer costs nothing when the page is quick.
expect.set_options(timeout=15_000)

# Every test module here starts with this: the session's loop (the browser's), and one xdist group.
UI_TESTS = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.xdist_group("webui")]


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("ANTLER_UI_ARTIFACTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not shutil.which(CHROMIUM):
        pytest.fail(
            f"the web UI tests need Chromium at {CHROMIUM}: `make install` (apt-get install chromium)"
        )
    manager = async_playwright()
    playwright = await manager.start()
    try:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            await _bounded(launched.close(), "closing Chromium")
    finally:
        # At the end of a worker's session this has waited forever (Chromium gone, the driver still
        # there, its stdin closed): a worker that never ends stalls the whole run, and one that waits
        # holds up its end. Give the driver a moment, then end it.
        if not await _bounded(playwright.stop(), "stopping Playwright's driver", seconds=5.0):
            driver = getattr(getattr(manager._client, "_transport", None), "_proc", None)
            if driver is not None and driver.returncode is None:
                driver.kill()


async def _bounded(step: Awaitable[Any], what: str, seconds: float = 30.0) -> bool:
    """Whether `step` finished within `seconds`."""
    try:
        await asyncio.wait_for(step, seconds)
    except Exception as exc:  # teardown: say so, do not hang or fail the last test for it
        warnings.warn(f"{what} did not finish: {type(exc).__name__}: {exc}", stacklevel=1)
        return False
    return True


@dataclass
class Stack:
    url: str
    model: FakeOpenAI
    config: AppConfig
    admin: BusConfig | None = None  # the stack's admin login (to reach behind the components' backs)
    nats_url: str = ""


Component = Callable[[str, AppConfig], contextlib.AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def module_ui_stack(
    nats_server: SecuredServer, tmp: Path, components: tuple[Component, ...], **sections: Any
) -> AsyncIterator[Stack]:
    """A test module's own stack for ana (an admin token), with the local sandbox and quick
    redelivery: `components` (each `running_x(nats_url, config)`, started in order), then the
    gateway; `sections`: more of the config."""
    async with module_stack(
        nats_server,
        tmp,
        {"ack_wait_seconds": 2.0, "max_deliver": 3},
        gateway={"port": 0, "tokens": [{"token": TOKENS["ana"], "user_id": "ana", "admin": True}]},
        sandbox={"provider": "local"},
        **sections,
    ) as up:
        url, config = nats_server.url, up.config
        async with contextlib.AsyncExitStack() as running:
            for component in components:
                await running.enter_async_context(component(url, config))
            base = await running.enter_async_context(running_gateway(url, config))
            yield Stack(url=base, model=up.model, config=config, nats_url=url)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Runner, sandbox broker, memory updater, subagent executor and gateway (tokens for ana and bob)."""
    tmp = tmp_path_factory.mktemp("webui-stack")
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp / "data")
    bus = BusConfig(prefix=users.prefix, ack_wait_seconds=2.0, max_deliver=3)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(tmp / "extensions_config.json"))
        async with FakeOpenAI(api_key="sk-test") as model:
            model.auto_suggestions = ["How many herds are there?", "Where do deer sleep?"]
            data = {
                "bus": component_bus(bus, tmp / "data"),
                "models": [
                    {
                        "name": "fake",
                        "display_name": "Fake model",
                        "model": "fake-1",
                        "api_key": "sk-test",
                        "base_url": model.base_url,
                        "max_retries": 0,
                        "supports_thinking": True,
                    }
                ],
                # the updater answers the settings page; it never asks the model (whose script is the tests')
                "memory": {"enabled": True, "debounce_seconds": 3600},
                "model_calls": {"initial_delay_seconds": 0.05, "max_delay_seconds": 2.0},
                "gateway": {
                    "port": 0,
                    "tokens": [
                        {"token": TOKENS["ana"], "user_id": "ana", "admin": True},
                        {"token": TOKENS["bob"], "user_id": "bob"},
                    ],
                },
                "sandbox": {"provider": "local"},
                "skills": {"path": str(skills_dir(tmp))},
            }
            config = _build(AppConfig, data, "test config")
            url = nats_server.url
            try:
                async with (
                    running_runner(url, config),
                    running_broker(url, config),
                    running_updater(url, config),
                    running_executor(url, config),
                    running_scheduler(url, config),
                    running_gateway(url, config) as base,
                ):
                    admin = bus.model_copy(
                        update={"user": users.admin.user, "password": users.admin.password}
                    )
                    yield Stack(url=base, model=model, config=config, admin=admin, nats_url=url)
                fail_on_violations(users, None)  # the module's stack, judged once at its end
            finally:
                users.close()


OpenPage = Callable[..., Awaitable[Page]]

CALL_FAILED = pytest.StashKey[bool]()
# Every toast the page shows, on its console: a toast lasts 5 s, a failed expectation waits 15.
TOAST_RECORDER = """
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("toast");
  const told = () => console.info(`[toast] ${box.textContent}`);
  if (box) new MutationObserver(told).observe(box, { childList: true });
});
"""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


@pytest_asyncio.fixture(loop_scope="session")
async def open_page(
    browser: Browser, stack: Stack, screenshots: Path, request: pytest.FixtureRequest
) -> AsyncIterator[OpenPage]:
    """`await open_page(user="ana", size=DESKTOP)`: a signed-in page in a fresh context, at `/`.

    When the test fails, what its pages showed and were told is printed with the failure (toasts,
    console messages, the gateway's error answers) and each page is screenshot: a flake in CI
    can be read afterwards."""
    contexts: list[BrowserContext] = []
    pages: list[Page] = []
    errors: list[str] = []
    seen: list[str] = []

    def note(page: int, line: str) -> None:
        seen.append(f"{page}: {line}")

    async def make(user: str | None = "ana", size: dict[str, int] = DESKTOP, path: str = "/") -> Page:
        context = await browser.new_context(viewport=size, accept_downloads=True)
        contexts.append(context)
        await context.add_init_script(TOAST_RECORDER)
        if user is not None:
            await context.add_init_script(f"localStorage.setItem('antler.token', {TOKENS[user]!r})")
        page = await context.new_page()
        pages.append(page)
        n = len(pages) - 1  # the page's number in what is printed and in its screenshot's name
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: note(n, f"console {message.type}: {message.text}"))
        page.on(
            "response",
            lambda response: (
                note(n, f"HTTP {response.status} {response.request.method} {response.url}")
                if response.status >= 400
                else None
            ),
        )
        await page.goto(stack.url + path)
        if user is not None:
            await page.locator("#app").wait_for()
        return page

    yield make
    if request.node.stash.get(CALL_FAILED, False):
        for n, page in enumerate(pages):
            with contextlib.suppress(Exception):
                await page.screenshot(path=screenshots / f"FAILED-{request.node.name}-{n}.png")
        print(f"what the pages showed and were told (page: line), screenshots in {screenshots}:")
        print("\n".join(seen[-60:]) or "(nothing)")
    for context in contexts:
        await context.close()
    stack.model._script.clear()  # a failed test's unused replies must not answer the next test
    assert not errors, f"the page threw: {errors}"
