"""A test component that needs a TCP service at start (`ANTLER_TEST_SERVICE_PORT` on 127.0.0.1), as an
adapter needs its platform: it raises while nothing listens there, and is ready once it connects."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from bus import Bus, component_ready

PORT_ENV = "ANTLER_TEST_SERVICE_PORT"


async def run(bus: Bus, config: Any) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", int(os.environ[PORT_ENV]))
    try:
        component_ready()
        await asyncio.Future()
    finally:
        writer.close()
