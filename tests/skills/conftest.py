"""Config for the shipped skills' tests: the repository's own `skills` directory, a real broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from config.loader import _build
from sandbox import SandboxClient
from tests.conftest import REPO
from tests.support.adapters import start_adapter, telegram, telegram_stack  # noqa: F401  (fixtures)
from tests.support.sandbox import PROVIDERS, running_broker

SKILLS = REPO / "skills"
SHIPPED = (
    "academic-paper-review",
    "bootstrap",
    "chart-report",
    "chart-visualization",
    "code-documentation",
    "consulting-analysis",
    "data-analysis",
    "deep-research",
    "document-report",
    "find-skills",
    "frontend-design",
    "github-deep-research",
    "image-generation",
    "music-generation",
    "newsletter-generation",
    "podcast-generation",
    "ppt-generation",
    "skill-creator",
    "skill-reviewer",
    "surprise-me",
    "systematic-literature-review",
    "video-generation",
    "web-design-guidelines",
)

# Their end-to-end tests reach a fake generation endpoint: tests/skills/test_media_skills.py.
MEDIA_SKILLS = ("image-generation", "music-generation", "podcast-generation", "video-generation")


def skills_config(config_data: dict[str, Any], provider: str = "local") -> AppConfig:
    """The test config with the repository's skills and a sandbox of the given provider."""
    data = {
        **config_data,
        "skills": {"path": str(SKILLS)},
        "sandbox": {"provider": provider, "command_timeout_seconds": 60, "cpu_seconds": 60},
    }
    return _build(AppConfig, data, "test config")


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture
async def broker(nats_url: str, config_data: dict[str, Any], provider: str) -> AsyncIterator[AppConfig]:
    """A sandbox broker that mounts the repository's skills at /mnt/skills."""
    config = skills_config(config_data, provider)
    async with running_broker(nats_url, config):
        yield config


@pytest.fixture
def client(bus: Bus) -> SandboxClient:
    return SandboxClient(bus, "ana", "t-skills")


def uploads_dir(config: AppConfig, user_id: str, thread_id: str) -> Path:
    """Where a thread's uploads are on the host (as the gateway would have put them)."""
    from sandbox.paths import ThreadFS

    root = Path(config.sandbox.data_dir or Path(config.bus.data_dir) / "sandbox").resolve()
    return ThreadFS(root, user_id, thread_id).uploads
