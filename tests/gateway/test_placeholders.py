"""DeerFlow features Antler does not have answer "none" or "off" (never 404), so the UI shows its
empty states; their actions say plainly that Antler does not have them (501)."""

from __future__ import annotations

import httpx


async def test_deerflows_other_features_read_as_empty_or_off(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    assert (await http.get("/channels/providers")).json() == {"enabled": False, "providers": []}
    assert (await http.get("/channels/connections")).json() == {"connections": []}
    lark = (await http.get("/integrations/lark/status")).json()
    assert (lark["installed"], lark["app_configured"], lark["installed_skills"]) == (False, False, [])
    assert (await http.get(f"/threads/{thread}/mcp-tasks", params={"limit": 20})).json() == []
    polished = await http.post("/input-polish", json={"text": "fix my grammer", "locale": "en"})
    assert polished.json() == {"rewritten_text": "fix my grammer", "changed": False}
    features = (await http.get("/features")).json()
    assert features["browser_control"] == features["mcp_tasks"] == {"enabled": False}


async def test_their_actions_say_antler_does_not_have_them(http: httpx.AsyncClient, api_url: str) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    actions = [
        ("POST", "/channels/telegram/connect", "connecting chat channels"),
        ("POST", "/integrations/lark/install", "the Lark integration"),
    ]
    for method, path, feature in actions:
        response = await http.request(method, path, json={})
        assert response.status_code == 501, path
        assert feature in response.json()["detail"]
        assert "Antler does not have" in response.json()["detail"]
    # Browser control is Antler's (gateway/rest/browser.py), off unless the browser is enabled.
    off = await http.post(f"/threads/{thread}/browser/navigate", json={"url": "https://example.com/"})
    assert off.status_code == 404
    assert "browser.enabled" in off.json()["detail"]
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        for path in ("scheduled-tasks", "mcp-tasks", "goal"):
            assert (await bob.get(f"/threads/{thread}/{path}")).status_code == 404, "not bob's thread"
