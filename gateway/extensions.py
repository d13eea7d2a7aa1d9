"""extensions_config.json's published copy and the MCP servers' status, on the bus: what the
gateway's `/api/mcp` and `/api/skills` routes and `antler.Client` share (no FastAPI here).

Every runner and subagent executor follows the `settings` bucket's key `extensions` and loads a
change before its next run; each of their processes reports how its MCP servers started under
`mcp_status.<process>`.
"""

from __future__ import annotations

import json
from typing import Any

from bus import Bus
from bus.records import keys_matching

EXTENSIONS_KEY = "extensions"


async def publish(bus: Bus, raw: dict[str, Any]) -> None:
    """Publish extensions_config.json's content: every process uses it from its next run on."""
    settings = await bus.kv(bus.subjects.settings_bucket)
    await settings.put(EXTENSIONS_KEY, json.dumps(raw).encode())


async def mcp_status(bus: Bus) -> dict[str, dict[str, Any]]:
    """Per server, how it started in each process that reported (runners, subagent executors):
    `{server: {process: {ok, error, tools}}}`."""
    bucket = bus.subjects.settings_bucket
    settings = await bus.kv(bucket)
    found: dict[str, dict[str, Any]] = {}
    for key in await keys_matching(bus.js, bucket, "mcp_status.*"):
        try:
            report = json.loads((await settings.get(key)).value or b"{}")
        except Exception:  # gone meanwhile
            continue
        for server, state in report.get("servers", {}).items():
            found.setdefault(server, {})[report.get("process", key)] = state
    return found
