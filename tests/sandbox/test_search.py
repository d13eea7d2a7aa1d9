"""The grep tool runs the user's pattern inside the sandbox: Python's `re`, a deadline, nobody else waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from config import AppConfig
from sandbox import InvalidRequest, SandboxClient, Timeout
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio

WS = "/mnt/user-data/workspace"
REDOS = "(a+)+$"


@pytest_asyncio.fixture
async def slow_grep_broker(
    nats_url: str, make_config: Callable[..., AppConfig], provider: str
) -> AsyncIterator[AppConfig]:
    config = make_config(provider=provider, grep_timeout_seconds=5)
    async with running_broker(nats_url, config):
        yield config


async def test_grep_keeps_pythons_regular_expression_syntax(client: SandboxClient, broker: AppConfig) -> None:
    await client.write_file(f"{WS}/notes.md", "call 555-1234\nKEY=alpha\nbook keeper\nnothing\n")
    await client.write_file(f"{WS}/src/app.py", "key=beta  # see notes\n")

    def found(result: object) -> list[tuple[str, int, str]]:
        return [(m.path, m.line, m.text) for m in result.matches]  # type: ignore[attr-defined]

    assert found(await client.grep(r"\d{3}-\d{4}", WS)) == [(f"{WS}/notes.md", 1, "call 555-1234")]
    assert [m.text for m in (await client.grep(r"(?<=key=)\w+", WS, ignore_case=True)).matches] == [
        "KEY=alpha",
        "key=beta  # see notes",
    ]
    assert [m.line for m in (await client.grep(r"(\w)\1", WS, glob="*.md")).matches] == [1, 3]
    assert found(await client.grep("(?i)see NOTES", f"{WS}/src/app.py")) == [
        (f"{WS}/src/app.py", 1, "key=beta  # see notes")
    ]
    capped = await client.grep(".", WS, max_matches=2)
    assert (len(capped.matches), capped.truncated) == (2, True)
    with pytest.raises(InvalidRequest, match="not a valid regular expression"):
        await client.grep("(?<=a+)b", WS)


async def test_a_catastrophic_pattern_is_stopped_and_other_requests_are_served_meanwhile(
    client: SandboxClient, slow_grep_broker: AppConfig
) -> None:
    await client.write_file(f"{WS}/evil.txt", "a" * 34 + "!\n")
    search = asyncio.create_task(client.grep(REDOS, WS))
    # While the pattern backtracks, the broker still answers: a command and a read of this thread.
    assert (await client.exec("echo alive")).output == "alive\n"
    assert (await client.read_file(f"{WS}/evil.txt")).content.startswith("aaaa")
    assert not search.done(), "the catastrophic pattern should still be running (or killed) by now"
    with pytest.raises(Timeout, match="grep stopped after 5s: the pattern took too long"):
        await search
    # And grep goes on working for patterns that behave.
    assert [m.text for m in (await client.grep("a!$", WS)).matches] == ["a" * 34 + "!"]
