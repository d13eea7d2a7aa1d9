"""Where the browser tests find Chromium, and when the browser component is up (for the browser's
tests and the web UI's browser view)."""

from __future__ import annotations

import asyncio
import os

from bus import Bus
from tests.conftest import until_answering

CHROMIUM = os.environ.get("ANTLER_CHROMIUM", "/usr/bin/chromium")


async def browser_ready(bus: Bus, task: asyncio.Task[None]) -> None:
    await until_answering(bus.subjects.service_subject("browser", "act"), bus, task)
