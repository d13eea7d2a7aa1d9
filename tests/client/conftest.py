"""What the client's tests against an embedded Antler share: the scripted model of the module's
Antler, and holding an answer to the gateway's response model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from pydantic import BaseModel

from tests.fakes.openai_server import FakeOpenAI


def conforms(model: type[BaseModel], answer: dict[str, Any]) -> None:
    """The gateway's model takes the client's answer and gives back exactly it."""
    assert model.model_validate(answer).model_dump(mode="json") == answer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> AsyncIterator[FakeOpenAI]:
    """The scripted model of the module's embedded Antler."""
    async with FakeOpenAI(api_key="sk-test") as fake:
        yield fake
