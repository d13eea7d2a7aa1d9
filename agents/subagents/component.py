"""The subagent executor component (`antler run subagents`), with LangChain loaded on its first task.

`antler up` runs this component inside its own process, beside the router, the gateway and the
memory updater, none of which needs LangChain. Loading it (LangChain, LangGraph, the model
provider: about 45 MB and a second of CPU) is put off until the first SubagentTask arrives, so a
stack where nobody delegates never pays for it. The consumer, the `$SRV` presence and the control
subscriptions start at once, as before: a task submitted early waits in the stream, is handed to
the handler, which loads the executor (`agents.subagents.executor.SubagentExecutor`; the import in
a worker thread, so the loop keeps serving the other components meanwhile) and runs it. The
delivery's in-progress heartbeat keeps it ours while that happens.

Stops (a parent run cancelled, a task given up) that arrive before the executor exists are kept,
with the time they arrived, and handed to it: a task of a stopped parent that arrives later is
not started, exactly as it would not have been with the executor loaded at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from typing import Any

from agents.subagents.stops import REMEMBER_STOPS, Stops
from bus import Bus, Consumer, Delivery, decode, run_consumers
from bus.messages import RunControl, SubagentCancel, SubagentTask
from bus.service import start_service
from config import AppConfig

log = logging.getLogger(__name__)

EXECUTOR_DURABLE = "subagents"


class LazyExecutor:
    """The consumer's handlers; the real executor is built on the first task (or dead letter)."""

    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config
        self.executor: Any = None  # agents.subagents.executor.SubagentExecutor, once loaded
        self._loading: asyncio.Task[Any] | None = None
        self._early_stops: Stops = {}
        self._resources = contextlib.AsyncExitStack()

    async def _loaded(self) -> Any:
        failed = (
            self._loading is not None
            and self._loading.done()
            and (self._loading.cancelled() or self._loading.exception() is not None)
        )
        if self._loading is None or failed:  # the first task, or the last attempt failed: (again)
            self._loading = asyncio.create_task(self._load())
        # Shielded: a handler cancelled meanwhile (stop) must not leave a half-opened executor.
        return await asyncio.shield(self._loading)

    async def _load(self) -> Any:
        started = time.perf_counter()
        module = await asyncio.to_thread(importlib.import_module, "agents.subagents.executor")
        checkpoints = await asyncio.to_thread(importlib.import_module, "agents.checkpoints")
        checkpointer = await self._resources.enter_async_context(checkpoints.checkpointer_ready(self.config))
        executor = module.SubagentExecutor(self.bus, self.config, checkpointer, stopped=self._early_stops)
        self.executor = executor  # from here on, stops go to it directly
        self._resources.push_async_callback(executor.close)
        await executor.open()
        log.info("subagent executor loaded for its first task (%.2fs)", time.perf_counter() - started)
        return executor

    async def handle(self, task: SubagentTask, delivery: Delivery) -> None:
        executor = await self._loaded()
        await executor.handle(task, delivery)

    async def on_dead_letter(self, msg: Any, reason: str) -> None:
        executor = await self._loaded()
        await executor.on_dead_letter(msg, reason)

    async def on_control(self, msg: Any) -> None:
        if self.executor is not None:
            await self.executor.on_control(msg)
            return
        with contextlib.suppress(Exception):
            control = decode(RunControl, msg.data)
            if control.stops:  # (steered, or followed live: its tasks go on)
                self._remember(control.run_id, None, f"the parent run was {control.action}led")

    async def on_cancel(self, msg: Any) -> None:
        if self.executor is not None:
            await self.executor.on_cancel(msg)
            return
        with contextlib.suppress(Exception):
            cancel = decode(SubagentCancel, msg.data)
            self._remember(cancel.parent_run_id, cancel.task_id, cancel.reason)

    def _remember(self, parent_run_id: str, task_id: str | None, reason: str) -> None:
        now = time.monotonic()
        stops = {k: v for k, v in self._early_stops.items() if now - v[0] < REMEMBER_STOPS}
        stops[(parent_run_id, task_id)] = (now, reason)
        self._early_stops = stops

    async def close(self) -> None:
        if self._loading is not None and not self._loading.done():
            with contextlib.suppress(BaseException):
                await self._loading
        await self._resources.aclose()


async def run(bus: Bus, config: AppConfig) -> None:
    """The subagent executor component: consume SubagentTasks until cancelled, then drain."""
    executor = LazyExecutor(bus, config)
    control = await bus.nc.subscribe(bus.subjects.run_control_all, cb=executor.on_control)
    cancels = await bus.nc.subscribe(bus.subjects.subagent_cancel_all, cb=executor.on_cancel)
    # No requests to answer; a service so that `$SRV` discovery (and /health) counts executors.
    presence = await start_service(
        bus, "subagents", [], description="Subagent executors (the task tool's work)"
    )
    s = bus.subjects
    try:
        await run_consumers(
            Consumer(
                bus,
                stream=s.subagents_stream,
                durable=EXECUTOR_DURABLE,
                filter_subjects=[s.subagents_submit],
                model=SubagentTask,
                handler=executor.handle,
                on_dead_letter=executor.on_dead_letter,
                concurrency=config.subagents.executor_concurrency,
                drain_timeout=config.subagents.drain_seconds,
            )
        )
    finally:
        await executor.close()
        await presence.stop()
        await control.unsubscribe()
        await cancels.unsubscribe()
