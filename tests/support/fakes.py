"""A fake external service (tests/fakes) as a fixture: started for each test, stopped after it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest_asyncio

Fake = TypeVar("Fake")


def fake_fixture(make: Callable[[], contextlib.AbstractAsyncContextManager[Fake]], doc: str) -> Any:
    """A fixture giving each test a fresh, started `make()`, stopped after it:
    `jina = fake_fixture(FakeJina, "The fake Jina Reader.")` (the fixture takes the name assigned)."""

    @pytest_asyncio.fixture
    async def fake() -> AsyncIterator[Fake]:
        async with make() as started:
            yield started

    fake.__doc__ = doc
    return fake
