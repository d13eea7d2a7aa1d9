"""A test module's own stack, for a module-scoped fixture (the per-test `config_data` and its
fixtures are function-scoped): a fresh prefix with its users, a scripted model, and the config."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import AppConfig, BusConfig
from config.loader import _build
from tests.conftest import component_bus, fail_on_violations
from tests.fakes.openai_server import FakeOpenAI
from tests.support.nats_users import SecuredServer, StackUsers


@dataclass
class ModuleStack:
    users: StackUsers
    admin: BusConfig  # the stack's admin login, to drive and observe it
    model: FakeOpenAI
    config: AppConfig


@contextlib.asynccontextmanager
async def module_stack(
    nats_server: SecuredServer, tmp: Path, bus: dict[str, Any] | None = None, **sections: Any
) -> AsyncIterator[ModuleStack]:
    """The stack's users in `<tmp>/data` and a config with the fake model, memory and titles off,
    `bus` (more of that section) and `sections` (more sections). A refusal the server logged for its
    users fails the module (`fail_on_violations`)."""
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp / "data")
    try:
        admin = BusConfig(
            prefix=users.prefix, user=users.admin.user, password=users.admin.password, **(bus or {})
        )
        async with FakeOpenAI(api_key="sk-test") as model:
            data = {
                "bus": component_bus(admin, tmp / "data"),
                "models": [
                    {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}
                ],
                "memory": {"enabled": False},
                "title": {"enabled": False},
                **sections,
            }
            try:
                yield ModuleStack(users, admin, model, _build(AppConfig, data, "test config"))
            finally:
                from llm.http import close_clients

                await close_clients()
        fail_on_violations(users, None)
    finally:
        users.close()
