"""The runner component (`antler run runner`): the Runner on the `runs.submit` durable, its
control subscription and the threads service, until cancelled, then drained."""

from __future__ import annotations

import asyncio
import os
from functools import partial

from agents.checkpoints import checkpointer_ready
from agents.graph.patches import inline_trace_bookkeeping
from agents.runner.runner import Runner
from agents.threads import ThreadService, serve_threads
from bus import Bus, Consumer, run_consumers
from bus.capacity import Capacity, default_memory_mb
from bus.health import component_degraded
from bus.messages import RunRequest
from config import AppConfig
from llm.usable import model_problem

DURABLE = "runner"


async def run(bus: Bus, config: AppConfig) -> None:
    """The runner component: consume RunRequests until cancelled, then drain."""
    inline_trace_bookkeeping()
    async with checkpointer_ready(config) as checkpointer:
        runner = await Runner.open(bus, config, checkpointer)
        threads = ThreadService(bus, config, checkpointer, runner.threads, runner.agents.get, runner.calls)
        service = await serve_threads(threads)
        control = await bus.nc.subscribe(bus.subjects.run_control_all, cb=runner.on_control)
        try:
            # In a worker thread: the event loop keeps answering signals and requests meanwhile.
            await asyncio.to_thread(runner.warm_up)
            # No usable model: it serves (the rest of Antler works), but /health says why it cannot answer.
            problem = await asyncio.to_thread(partial(model_problem, config, build=True))
            component_degraded(problem.reason if problem is not None else None)
            s = bus.subjects
            consumer = Consumer(
                bus,
                stream=s.runs_stream,
                durable=DURABLE,
                filter_subjects=[s.runs_submit],
                model=RunRequest,
                handler=runner.handle,
                on_invalid=runner.on_invalid,
                on_dead_letter=runner.on_dead_letter,
                concurrency=config.runner.concurrency,
                # Runs mostly wait on models: how many at once is what the process can carry.
                capacity=Capacity(
                    config.runner.max_loop_lag_ms / 1000,
                    config.runner.max_memory_mb
                    or default_memory_mb(config.runner.processes or min(4, os.cpu_count() or 1)),
                ),
                # Runs that cannot finish by then go back to the bus and resume elsewhere (or after a
                # restart) from their checkpoints; within `antler up`'s grace for its runner children.
                drain_timeout=config.runner.drain_seconds,
            )
            await run_consumers(consumer)
        finally:
            await service.stop()
            await control.unsubscribe()
            await runner.tools.mcp.close()
            await runner.memory_and_prompt.close()
            await runner.calls.close()
