"""DeerFlow's `/api/threads/{id}/browser/navigate`: the web UI steers the thread's page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bus import Bus
from config import AppConfig
from tests.fakes.web_pages import WebPages
from tests.support.gateway import running_gateway

pytestmark = pytest.mark.asyncio


async def test_the_ui_navigates_the_threads_page_and_gets_its_screenshot(
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    browser_config: dict[str, Any],
    browser_component: Bus,
    runner: None,
    site: WebPages,
) -> None:
    config_data["gateway"] = {"port": 0, "tokens": [{"token": "tok-ana", "user_id": "ana"}]}
    async with (
        running_gateway(nats_url, app_config()) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-ana"}, timeout=90) as http,
    ):
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        assert (await http.get("/features")).json()["browser_control"] == {"enabled": True}
        answer = await http.post(
            f"/threads/{thread}/browser/navigate", json={"url": f"http://127.0.0.1:{site.port}/"}
        )
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert page["title"] == "Parcel tracker"
        assert page["screenshot"] == "/mnt/user-data/outputs/.browser/latest.jpg"
        shot = await http.get(f"/threads/{thread}/artifacts{page['screenshot']}")
        assert shot.status_code == 200
        assert shot.content.startswith(b"\xff\xd8"), "the live view's picture of the page"

        refused = await http.post(f"/threads/{thread}/browser/navigate", json={"url": "file:///etc/passwd"})
        assert refused.status_code == 400
        assert "http" in refused.json()["detail"]


async def test_a_person_whose_role_has_no_egress_cannot_steer_the_page_from_the_ui(
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    browser_config: dict[str, Any],
    browser_component: Bus,
    runner: None,
    site: WebPages,
) -> None:
    config_data["gateway"] = {"port": 0, "tokens": [{"token": "tok-gus", "user_id": "gus"}]}
    config_data["access"] = {
        "roles": {"member": {}, "guest": {"egress": {"mode": "none"}}},
        "default_role": "guest",
    }
    async with (
        running_gateway(nats_url, app_config()) as base,
        httpx.AsyncClient(base_url=f"{base}/api", headers={"x-api-key": "tok-gus"}, timeout=90) as http,
    ):
        made = await http.post("/threads", json={})
        assert made.status_code == 200, made.text
        thread = made.json()["thread_id"]
        answer = await http.post(
            f"/threads/{thread}/browser/navigate", json={"url": f"http://127.0.0.1:{site.port}/"}
        )
    assert answer.status_code == 403, answer.text
    assert "allows no network access" in answer.json()["detail"]
    assert site.calls == []
