"""The request/reply service helper against a real nats-server: every request gets an answer."""

from __future__ import annotations

import asyncio

import pytest

from bus import Bus
from bus.messages import ExecReply, ExecRequest
from bus.service import Endpoint, ServiceError, call, start_service

pytestmark = pytest.mark.asyncio


class Refused(Exception):
    pass


async def test_a_slow_request_does_not_hold_up_the_next(bus: Bus) -> None:
    release = asyncio.Event()

    async def handle(req: ExecRequest) -> ExecReply:
        if req.command == "slow":
            await release.wait()
        return ExecReply(output=req.command)

    running = await start_service(
        bus, "svc", [Endpoint("run", ExecRequest, ExecReply, handle)], description="test"
    )
    try:
        slow = asyncio.create_task(
            call(bus, "svc", "run", ExecRequest(thread_id="t", command="slow"), ExecReply, timeout=10)
        )
        quick = await call(
            bus, "svc", "run", ExecRequest(thread_id="t", command="quick"), ExecReply, timeout=10
        )
        assert quick.output == "quick"
        assert not slow.done()
        release.set()
        assert (await slow).output == "slow"
    finally:
        await running.stop()


async def test_failures_come_back_as_errors_with_their_code(bus: Bus) -> None:
    async def handle(req: ExecRequest) -> ExecReply:
        if req.command == "refuse":
            raise ServiceError("not yours", "not_allowed")
        if req.command == "wrong":
            raise Refused("that makes no sense")
        raise RuntimeError("the handler broke")

    running = await start_service(
        bus, "svc", [Endpoint("run", ExecRequest, ExecReply, handle)], description="test", invalid=(Refused,)
    )
    try:

        async def fails(command: str) -> ServiceError:
            with pytest.raises(ServiceError) as info:
                await call(
                    bus, "svc", "run", ExecRequest(thread_id="t", command=command), ExecReply, timeout=10
                )
            return info.value

        refused = await fails("refuse")
        assert (refused.code, refused.message) == ("not_allowed", "not yours")
        wrong = await fails("wrong")
        assert wrong.code == "invalid"
        assert "that makes no sense" in wrong.message
        broke = await fails("crash")
        assert broke.code == "internal"
        assert "the handler broke" in broke.message

        # Bytes that are no request at all: an answer saying so, and the service keeps serving.
        raw = await bus.nc.request(bus.subjects.service_subject("svc", "run"), b"{not json", timeout=10)
        assert ExecReply.model_validate_json(raw.data).error.code == "invalid"
        await fails("refuse")
    finally:
        await running.stop()


async def test_a_service_nobody_runs_is_unavailable_in_the_callers_own_terms(bus: Bus) -> None:
    class Mine(Exception):
        def __init__(self, code: str, message: str) -> None:
            super().__init__(f"{code}: {message}")

    with pytest.raises(Mine, match="unavailable: start the widget service"):
        await call(
            bus,
            "widgets",
            "spin",
            ExecRequest(thread_id="t", command="x"),
            ExecReply,
            timeout=5,
            errors=Mine,
            unavailable="start the widget service",
        )
