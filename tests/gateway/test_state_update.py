"""Thread-state updates the lead agent's graph cannot apply are 422s naming the field, not 500s."""

from __future__ import annotations

from typing import Any

import httpx
import pytest_asyncio


@pytest_asyncio.fixture
async def thread(http: httpx.AsyncClient) -> str:
    return str((await http.post("/threads", json={})).json()["thread_id"])


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "list-values": ({"values": [1, 2]}, "values"),
    "message-not-a-message": ({"values": {"messages": 5}}, "values.messages"),
    "message-without-role": ({"values": {"messages": [{"foo": 1}]}}, "values.messages"),
    "title-not-text": ({"values": {"title": 5}}, "values.title"),
    "artifacts-not-a-list": ({"values": {"artifacts": 5}}, "values.artifacts"),
    "images-not-a-map": ({"values": {"viewed_images": [1]}}, "values.viewed_images"),
    "unknown-node": ({"values": {"title": "x"}, "as_node": "nosuch"}, "as_node"),
}


async def test_an_update_the_graph_would_refuse_is_a_422_naming_the_field(
    http: httpx.AsyncClient, thread: str
) -> None:
    for case, (update, named) in REFUSED.items():  # one back end for all: each would start its own
        response = await http.post(f"/threads/{thread}/state", json=update)
        assert response.status_code == 422, (case, response.text)
        assert response.json()["detail"].startswith(f"{named}:"), case
    assert "title" not in (await http.get(f"/threads/{thread}/state")).json()["values"]


async def test_a_valid_update_is_applied(http: httpx.AsyncClient, thread: str) -> None:
    update = {
        "values": {
            "title": "Renamed",
            "messages": [{"role": "user", "content": "hi"}],
            "artifacts": ["/mnt/user-data/outputs/a.md"],
            "unknown_key": "ignored, as LangGraph ignores it",
        },
        "as_node": "model",
    }
    response = await http.post(f"/threads/{thread}/state", json=update)
    assert response.status_code == 200, response.text
    assert response.json()["checkpoint"]["thread_id"] == thread
    values = (await http.get(f"/threads/{thread}/state")).json()["values"]
    assert values["title"] == "Renamed"
    assert [m["content"] for m in values["messages"]] == ["hi"]
    assert values["artifacts"] == ["/mnt/user-data/outputs/a.md"]
