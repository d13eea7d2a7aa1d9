"""An admin's change to MCP servers is in the audit trail (who, what, never the settings themselves);
a refused attempt is not a change."""

from __future__ import annotations

import httpx

from config import AppConfig
from tests.gateway.conftest import running_gateway


async def test_an_mcp_change_is_audited_with_who_made_it_and_no_settings(
    nats_url: str, stack_config: AppConfig
) -> None:
    server = {"type": "stdio", "command": "true", "enabled": False, "env": {"API_KEY": "s3cr3t-key"}}
    async with (
        running_gateway(nats_url, stack_config) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}, timeout=30) as ana,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-bob"}, timeout=30) as bob,
    ):
        refused = await bob.patch("/mcp/config", json={"mcp_servers": {"tools": server}})
        assert refused.status_code == 403
        changed = await ana.patch("/mcp/config", json={"mcp_servers": {"tools": server}})
        assert changed.status_code == 200, changed.text
        trail = (await ana.get("/v1/audit", params={"action": "admin_change"})).json()["records"]
    assert len(trail) == 1
    assert trail[0]["actor"] == "ana"
    assert trail[0]["detail"] == {"method": "PATCH", "path": "/api/mcp/config", "status": 200}
    assert "s3cr3t" not in str(trail)
