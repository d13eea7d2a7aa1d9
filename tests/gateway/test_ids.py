"""Thread and run ids the gateway cannot use are 4xx answers with a reason, never a 500 or a reset."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx
import pytest

from gateway.ids import is_valid_id

HI = {"messages": [{"role": "user", "content": "Hello there"}]}


async def raw_get(base_url: str, path: str) -> tuple[int, bytes]:
    """GET `path` exactly as written (HTTP clients would resolve `..` before sending it)."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        head = f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nx-api-key: tok-ana\r\nConnection: close\r\n"
        writer.write(f"{head}\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param("2f1a6a8e-6a55-4bb0-9f0b-0d2a6bd0b6d1", True, id="uuid"),
        pytest.param("my-thread_1", True, id="name"),
        pytest.param("", False, id="empty"),
        pytest.param("..", False, id="dot-dot"),
        pytest.param("a.b", False, id="dot"),
        pytest.param("a b", False, id="space"),
        pytest.param("*", False, id="wildcard"),
        pytest.param(">", False, id="tail-wildcard"),
        pytest.param("a/b", False, id="slash"),
        pytest.param("a=b", False, id="equals"),  # the sandbox's directory names would fold it to a_b
        pytest.param("abc\n", False, id="trailing-newline"),
        pytest.param("x" * 129, False, id="too-long"),
    ],
)
def test_ids_are_one_safe_token(value: str, valid: bool) -> None:
    assert is_valid_id(value) is valid


CANNOT_EXIST = {
    "encoded-dot-dot": "/threads/%2e%2e",
    "space": "/threads/a%20b",
    "wildcard": "/threads/*",
    "tail-wildcard": "/threads/%3E/state",
    "dot": "/threads/a.b/runs",
    "uploads": "/threads/a.b/uploads/list",
    "messages": "/threads/a%20b/messages",
}


async def test_a_thread_id_that_cannot_exist_is_not_found(http: httpx.AsyncClient) -> None:
    for case, path in CANNOT_EXIST.items():  # one back end for all: each would start its own
        response = await http.get(path)
        assert response.status_code == 404, case
        assert response.json()["detail"].endswith("not found"), case


async def test_a_bare_dot_dot_thread_id_is_not_found(api_url: str) -> None:
    status, body = await raw_get(api_url, "/api/threads/..")
    assert status == 404
    assert b"not found" in body


async def test_run_ids_that_cannot_exist_are_not_found(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    for path in (f"/threads/{thread}/runs/%2e%2e", "/runs/a%20b/stream", f"/threads/{thread}/runs/*/join"):
        response = await http.get(path)
        assert response.status_code == 404, path
        assert "not found" in response.json()["detail"]


async def test_searching_for_ids_that_cannot_exist_finds_nothing(http: httpx.AsyncClient) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    response = await http.post("/threads/search", json={"ids": ["", "..", "a b", thread]})
    assert response.status_code == 200
    assert [t["thread_id"] for t in response.json()] == [thread]


async def test_creating_a_thread_with_an_unusable_id_is_a_422_that_says_why(http: httpx.AsyncClient) -> None:
    for thread_id in ("..", "a b", "a.b", "x" * 200):
        response = await http.post("/threads", json={"thread_id": thread_id})
        assert response.status_code == 422, thread_id
        assert "cannot be used for a new thread" in response.json()["detail"]


async def test_an_empty_thread_id_gets_a_new_one(http: httpx.AsyncClient) -> None:
    response = await http.post("/threads", json={"thread_id": ""})
    assert response.status_code == 200
    assert is_valid_id(response.json()["thread_id"])


async def test_a_run_cannot_create_a_thread_with_an_unusable_id(http: httpx.AsyncClient) -> None:
    body = {"assistant_id": "lead_agent", "input": HI, "if_not_exists": "create"}
    response = await http.post("/threads/a.b/runs", json=body)
    assert response.status_code == 422
    assert "cannot be used for a new thread" in response.json()["detail"]
    body["if_not_exists"] = "reject"
    assert (await http.post("/threads/a.b/runs", json=body)).status_code == 404
