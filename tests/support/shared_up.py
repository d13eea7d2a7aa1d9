"""One `antler up` on its defaults, shared by the tests that only use a running stack.

Starting a whole stack (runner processes, sandbox broker, gateway, ...) costs ~9 s of CPU; tests that
only send, read, query or run CLI verbs against one, without killing or reconfiguring it, share this
one: the `shared_up` fixture (tests/conftest.py), session-scoped, on one pytest-xdist worker, where
its tests run one after another; it is stopped after the last of them (`pytest_runtest_teardown`).

How a test uses it (the contract that keeps one test's leftovers from deciding another's outcome):
- mark it `SHARED_UP` (the xdist group, so every such test runs on the worker that holds the stack;
  the session's event loop, on which the stack's fake model serves);
- use ids of its own: chat ids, thread ids, account e-mails, channel names no other test uses;
- script the model only with `Reply(..., when="<marker of its own>")`: the memory updater and other
  tests' runs ask the same model, and an unconditional reply goes to whoever asks first (what a test
  leaves unused is dropped after it);
- never kill, restart or reconfigure the stack, and provoke no dead letter (a verb lists them);
- leave no sign-in account behind (`accounts_left_as_found`): with one, the gateway wants sign-in;
- count what the stack counts (metrics, runs) as a difference, never as a total.

The stack is `antler up` started as users start it, in a directory holding config.yaml: only the model,
a free gateway port and the runner processes (the default on two cores, said outright so a bigger
machine runs the same stack) are configured. At the end it must stop cleanly on SIGTERM (Ctrl-C is
tested where a test stops its own stack) and its nats-server must have refused no component; the
refusals scripts with minted client credentials provoke on purpose (`<prefix>-client-...`) are allowed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.fakes.openai_server import FakeOpenAI
from tests.support.antler_up import AntlerUp

GROUP = "antler-up"
SHARED_UP = [pytest.mark.xdist_group(GROUP), pytest.mark.asyncio(loop_scope="session")]
PREFIX = "antler"  # the default bus prefix
PROVOKED = f"{PREFIX}-client-"  # users minted by `antler creds` for scripts, refused on purpose by tests


@dataclass
class SharedUp:
    """The running stack: its directory (config.yaml, `.antler` data dir), child and fake model."""

    up: AntlerUp
    model: FakeOpenAI
    gateway: str
    nats_url: str

    @property
    def workdir(self) -> Path:
        return self.up.workdir

    @property
    def config(self) -> Path:
        return self.up.workdir / "config.yaml"

    @property
    def data_dir(self) -> Path:
        return self.up.data_dir

    @contextlib.asynccontextmanager
    async def accounts_left_as_found(self) -> AsyncIterator[None]:
        """Remove, on leaving, the sign-in accounts made inside: while one exists, the gateway asks
        every caller to sign in (no more single-user mode), which would decide later tests' outcome."""
        from bus.launcher import login
        from config import AppConfig, BusConfig
        from gateway.accounts import AccountStore

        as_admin = login(AppConfig(bus=BusConfig(data_dir=str(self.data_dir))))
        bus = await as_admin.connect(self.nats_url, "test-accounts", provision=False)
        try:
            accounts = await AccountStore.open(bus)
            before = {account.email for account in await accounts.all()}
            yield
            for account in await accounts.all():
                if account.email not in before:
                    await accounts.remove(account.email)
        finally:
            await bus.close()


@contextlib.asynccontextmanager
async def shared_stack(workdir: Path) -> AsyncIterator[SharedUp]:
    """Start the stack in `workdir`; on leaving, stop it with SIGTERM and check its server's log."""
    async with FakeOpenAI(api_key="sk-test") as model:
        config = {
            "models": [{"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}],
            "gateway": {"port": 0},  # the default, 2026, may be taken on a shared machine
            "runner": {"processes": 2},  # the default on two cores
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        up = AntlerUp(workdir)
        try:
            await up.start(runners=2)
            yield SharedUp(up, model, await up.gateway_url(), await up.nats_url())
            up.send_signal(signal.SIGTERM)
            code = await up.wait_exit(90)
            assert code == 0, f"the shared antler up did not stop cleanly on SIGTERM ({code}):\n{up.tail()}"
        finally:
            await up.kill_all()
        refused = [v for v in up.violations() if not v.startswith(PROVOKED)]
        assert not refused, "nats-server refused components on defaults:\n  " + "\n  ".join(refused)
