"""Running components: start them, wait for SIGTERM/SIGINT, drain them, exit cleanly.

A component is an `async def run(bus, config)` that works until it is
cancelled and then drains (see `run_consumers`). `serve()` runs several on one
bus until asked to stop; one that fails is started again with backoff while the
others go on (`bus.supervision`). A component says how it is doing with
`component_ready()` (`run_consumers` does, once every consumer takes work) and
the other functions of `bus.health`; `serve(on_health=...)` hears it, and every
process publishes it with its metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import io
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from bus import tracing
from bus.connection import Bus
from bus.consumer import Consumer
from bus.health import Tracker, component_ready, tracking
from bus.messages import ComponentHealth
from bus.metrics_feed import MetricsFeed
from bus.supervision import Backoff, supervised
from bus.tasks import cancel_and_wait, until_cancelled
from bus.tasks import wait_for as wait

log = logging.getLogger(__name__)

ComponentEntry = Callable[[Bus, Any], Awaitable[None]]
T = TypeVar("T")

__all__ = [
    "ComponentEntry",
    "ComponentFailed",
    "component_ready",
    "on_main_exit",
    "run_consumers",
    "run_main",
    "serve",
    "stop_on_signals",
]

# Coroutine functions run when `run_main`'s coroutine ends, on its loop (connection pools to close).
_at_exit: list[Callable[[], Awaitable[None]]] = []


def on_main_exit(callback: Callable[[], Awaitable[None]]) -> None:
    """Have `callback()` awaited when `run_main`'s coroutine ends, on its loop (once per callback)."""
    if callback not in _at_exit:
        _at_exit.append(callback)


# The cyclic collector's thresholds for a component process: a turn of the agent allocates tens of
# thousands of objects (messages, chunks, pydantic models) and frees nearly all of them by
# reference counting; with Python's default (a collection every 700 allocations) the collector took
# about a fifth of a runner's CPU. Cycles are still collected, in fewer, larger passes.
GC_THRESHOLDS = (20_000, 20, 20)


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run`, on uvloop where it is installed (a faster event loop; same semantics), with the
    collector tuned for a long-running service (`GC_THRESHOLDS`; `component_ready` freezes what
    start-up built)."""
    gc.set_threshold(*GC_THRESHOLDS)

    async def then_close() -> T:
        try:
            return await main
        finally:
            for callback in _at_exit:
                try:
                    await callback()
                except Exception as exc:  # the process is ending: note it, go on
                    log.debug("an exit callback failed: %s", exc)

    try:
        import uvloop
    except ImportError:  # pragma: no cover - a platform without uvloop
        return asyncio.run(then_close())
    return uvloop.run(then_close())


class ComponentFailed(Exception):
    def __init__(self, name: str, error: BaseException) -> None:
        self.name = name
        self.error = error
        super().__init__(f"component {name} failed: {type(error).__name__}: {error}")


async def run_consumers(*consumers: Consumer[Any]) -> None:
    """Start consumers, keep them running until cancelled, then drain them all."""
    started: list[Consumer[Any]] = []
    try:
        for consumer in consumers:
            await consumer.start()
            started.append(consumer)
        component_ready()
        await until_cancelled()
    finally:
        await asyncio.gather(*(c.stop() for c in started), return_exceptions=True)


def dump_tasks() -> None:
    """Write what every asyncio task of this loop is waiting on to stderr: a process that will not
    stop, or seems stuck, shows why on `kill -USR1 <pid>`. Each task's whole await chain (the
    coroutine it runs, the one that awaits, ... down to the innermost), not only its outer frame."""
    out = io.StringIO()
    tasks = asyncio.all_tasks()
    print(f"--- {len(tasks)} asyncio task(s) ---", file=out)
    for task in sorted(tasks, key=lambda t: t.get_name()):
        print(f"task {task.get_name()!r}{' (cancelling)' if task.cancelling() else ''}:", file=out)
        for frame in _await_chain(task.get_coro()):
            code = frame.f_code
            print(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}', file=out)
    print("--- end of tasks ---", file=out)
    sys.stderr.write(out.getvalue())
    sys.stderr.flush()


def _await_chain(coro: Any) -> list[Any]:
    """The frames of a coroutine and of everything it awaits in turn (`cr_await`; generators'
    `gi_yieldfrom`, async generators' `ag_await`), outermost first."""
    frames: list[Any] = []
    while coro is not None and len(frames) < 64:
        frame = (
            getattr(coro, "cr_frame", None)
            or getattr(coro, "gi_frame", None)
            or getattr(coro, "ag_frame", None)
        )
        if frame is not None:
            frames.append(frame)
        coro = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "gi_yieldfrom", None)
            or getattr(coro, "ag_await", None)
        )
    return frames


def stop_on_signals(stop: asyncio.Event) -> Callable[[], None]:
    """Set `stop` on the first SIGTERM/SIGINT; a second one aborts at once. Returns an undo.

    SIGUSR1 prints every asyncio task's stack to stderr (`dump_tasks`), SIGUSR2 every thread's."""
    loop = asyncio.get_running_loop()
    hits = 0

    def on_signal(signum: int) -> None:
        nonlocal hits
        hits += 1
        if hits == 1:
            log.info("%s received: draining (send it again to abort)", signal.Signals(signum).name)
            stop.set()
        else:
            log.warning("second signal: aborting without draining")
            raise SystemExit(130)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
    # Even with the event loop stuck, SIGUSR2 prints every thread's stack (from C, not the loop).
    with contextlib.suppress(Exception):
        faulthandler.register(signal.SIGUSR2, all_threads=True)

    def undo() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)

    return undo


async def serve(
    bus: Bus,
    config: Any,
    components: Mapping[str, ComponentEntry],
    stop: asyncio.Event,
    *,
    drain_timeout: float = 30.0,
    on_health: Callable[[str, ComponentHealth], None] | None = None,
    in_process: Sequence[str] | None = None,
) -> None:
    """Run `components` until `stop` is set, then cancel (drain) them. A component that fails is
    started again with backoff (`bus.supervision`, `bus.restart_*` in the config); the others go on.

    `on_health(name, health)` is called each time a component's health changes (`bus.health`): it
    is ready, it failed and when it is tried again, it says it is unhealthy or degraded.
    `in_process`: the components whose work this process does, as its metrics say (default: all;
    `antler up` leaves out those it runs in child processes, whose health it publishes only when
    they are not well: the children publish their own).

    Raises:
        ComponentFailed: a component's task ended with what is not an `Exception` (the others are
            drained first); failures are retried instead.
    """
    # This process's metrics, on the bus for the gateway's /metrics and `antler top` (bus.metrics_feed).
    observability = getattr(config, "observability", None)
    # Traces (off unless config or the OTEL_* environment asks): one exporter per process.
    tracing.setup(
        getattr(observability, "tracing", None), next(iter(components)) if len(components) == 1 else "up"
    )
    here = list(components) if in_process is None else list(in_process)
    trackers: dict[str, Tracker] = {}

    def published() -> dict[str, ComponentHealth]:
        reports = {name: tracker.report() for name, tracker in trackers.items()}
        return {n: r for n, r in reports.items() if n in here or r.status in ("unhealthy", "degraded")}

    feed = MetricsFeed(bus, here, getattr(observability, "metrics_interval_seconds", 0.0), published)

    def changed(tracker: Tracker) -> None:
        feed.poke()
        if on_health is not None:
            on_health(tracker.name, tracker.report())

    feed.start()
    backoff = Backoff.from_config(config)
    tasks: dict[asyncio.Task[Any], str] = {}
    for name, entry in components.items():
        tracker = trackers[name] = Tracker(name, changed)
        task: asyncio.Task[None] = asyncio.create_task(
            supervised(name, _starter(entry, bus, config), tracker, backoff),
            name=name,
            context=tracking(tracker),
        )
        tasks[task] = name
    stopper = asyncio.create_task(stop.wait(), name="stop")
    failed: ComponentFailed | None = None
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for ended in done:
            if ended is not stopper:
                error = ended.exception() if not ended.cancelled() else asyncio.CancelledError()
                failed = ComponentFailed(tasks[ended], error or RuntimeError("returned unexpectedly"))
                log.error("%s", failed)
    finally:
        stopper.cancel()
        await feed.stop()
        running = [t for t in tasks if not t.done()]
        for task in running:
            task.cancel()
        if running:
            _, pending = await asyncio.wait(running, timeout=drain_timeout)
            for task in pending:
                log.warning("component %s did not drain within %ss", tasks[task], drain_timeout)
            if pending:  # cancelled again (one may have lost its cancellation): it must end
                with contextlib.suppress(TimeoutError):
                    await wait(cancel_and_wait(*pending), 5.0)
        for task in running:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("component %s raised while draining: %r", tasks[task], task.exception())
    if failed is not None:
        raise failed


def _starter(entry: ComponentEntry, bus: Bus, config: Any) -> Callable[[], Awaitable[None]]:
    async def start() -> None:
        await entry(bus, config)

    return start
