"""Each component's health: starting, healthy, degraded or unhealthy, and why.

A component says how it is doing with the functions below. They act on the component whose task
calls them (a context variable `serve()` sets), so code deep inside one (an adapter's polling
request) needs no handle; outside `serve()` (a component a test runs directly) they do nothing.

- `component_ready()`: it serves (its consumers take work, its service answers);
- `component_unhealthy(reason)`: it runs but cannot do its work now (its platform unreachable) and
  is working on it; `component_healthy()` once that is over;
- `component_degraded(reason)`: it serves, with less than it should (a sandbox whose toolbox is
  still being built); `component_degraded(None)` once that is over.

The runtime adds the failures (`bus.supervision`): a component that raised is unhealthy, with the
reason and when it is tried again, until it says it is ready again. Every process publishes its
components' health with its metrics (`bus.metrics_feed`, at once when one changes); `summarize`
merges what every live process said, for the gateway's `/health` and `antler top`.
"""

from __future__ import annotations

import contextvars
import gc
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from bus.messages import ComponentHealth, HealthStatus, MetricsSnapshot

log = logging.getLogger(__name__)

# Worst first wins when processes disagree about one component.
SEVERITY: dict[HealthStatus, int] = {"healthy": 0, "starting": 1, "degraded": 2, "unhealthy": 3}


class Tracker:
    """One component's health in this process. The component's own word (ready, its platform's
    state, what it lacks) and the runtime's (it failed: when it is tried again) are kept apart, so
    that neither clears the other's: a consumer saying it is ready does not make a lost platform
    connection healthy."""

    def __init__(self, name: str, on_change: Callable[[Tracker], None] | None = None) -> None:
        self.name = name
        self._on_change = on_change
        self.ready = False
        self.ready_since: float | None = None  # time.monotonic() of the last ready
        self.failure: str | None = None
        self.retry_at: datetime | None = None
        self.failures = 0
        self.problem: str | None = None
        self.lacking: str | None = None
        self._shown: tuple[HealthStatus, str | None] = ("starting", None)
        self._since = datetime.now(UTC)

    def status(self) -> tuple[HealthStatus, str | None]:
        if self.failure is not None:
            return "unhealthy", self.failure
        if self.problem is not None:
            return "unhealthy", self.problem
        if not self.ready:
            return "starting", None
        if self.lacking is not None:
            return "degraded", self.lacking
        return "healthy", None

    def report(self) -> ComponentHealth:
        status, reason = self.status()
        return ComponentHealth(
            status=status, reason=reason, since=self._since, retry_at=self.retry_at, failures=self.failures
        )

    def served_for(self) -> float:
        """Seconds it has been ready (0 when it is not)."""
        return time.monotonic() - self.ready_since if self.ready and self.ready_since is not None else 0.0

    # ------------------------------------------------------------------ the component's word

    def set_ready(self) -> None:
        if not self.ready:
            self.ready_since = time.monotonic()
        self.ready = True
        self.failure = None
        self.retry_at = None
        self._changed()

    def set_problem(self, reason: str | None) -> None:
        self.problem = reason
        self._changed()

    def set_lacking(self, reason: str | None) -> None:
        self.lacking = reason
        self._changed()

    # ------------------------------------------------------------------ the runtime's word

    def set_failed(self, reason: str, retry_at: datetime) -> None:
        """It raised and is started again at `retry_at`: what it said about itself is over."""
        self.ready = False
        self.ready_since = None
        self.problem = None
        self.failure = reason
        self.retry_at = retry_at
        self.failures += 1
        self._changed(force=True)

    def _changed(self, *, force: bool = False) -> None:
        shown = self.status()
        if shown == self._shown and not force:
            return
        if self._shown[0] == "unhealthy" and shown[0] == "healthy":
            log.info("%s: healthy again", self.name)
        if shown != self._shown:
            self._since = datetime.now(UTC)
        self._shown = shown
        if self._on_change is not None:
            try:
                self._on_change(self)
            except Exception:  # a listener's failure is not the component's
                log.exception("a health listener failed for component %s", self.name)


# Set by `serve()` in each component's task.
_tracker: contextvars.ContextVar[Tracker | None] = contextvars.ContextVar(
    "antler_component_health", default=None
)


def tracking(tracker: Tracker) -> contextvars.Context:
    """A context for a component's task, in which the functions below speak for `tracker`."""
    context = contextvars.copy_context()
    context.run(_tracker.set, tracker)
    return context


_frozen = False  # whether start-up's objects are frozen (component_ready)


def component_ready() -> None:
    """Tell whoever runs this component that it is ready to serve (safe to call more than once).

    `run_consumers` calls it once its consumers take work; a component that serves another
    way (an HTTP server, services only) may call it itself.
    """
    # What the component built to start (modules, compiled agents, clients) lives as long as the
    # process: out of the cyclic collector's sight, so its collections scan only what work makes.
    # Once per process (later, objects of work under way in other components would be frozen too).
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()
    tracker = _tracker.get()
    if tracker is not None:
        tracker.set_ready()


def component_unhealthy(reason: str) -> None:
    """This component cannot do its work now (say why: "cannot reach api.telegram.org: ConnectError;
    reconnecting in 4s") and is working on it; `component_healthy()` once it can again."""
    tracker = _tracker.get()
    if tracker is not None:
        tracker.set_problem(reason)


def component_healthy() -> None:
    """What `component_unhealthy` said is over."""
    tracker = _tracker.get()
    if tracker is not None:
        tracker.set_problem(None)


def component_degraded(reason: str | None) -> None:
    """This component serves, with less than it should (why); None: it lacks nothing any more."""
    tracker = _tracker.get()
    if tracker is not None:
        tracker.set_lacking(reason)


# ---------------------------------------------------------------------- reading it back


def describe(health: ComponentHealth, now: datetime | None = None) -> str:
    """The reason, with when it is tried again ("...; retrying in 8s")."""
    text = health.reason or health.status
    if health.retry_at is not None:
        wait = (health.retry_at - (now or datetime.now(UTC))).total_seconds()
        text += f"; retrying in {wait:.0f}s" if wait >= 0.5 else "; retrying now"
    return text


@dataclass(frozen=True)
class Summary:
    """One component across the live processes: its worst status, why, and in how many processes."""

    status: HealthStatus
    reason: str
    processes: int
    affected: int

    @property
    def text(self) -> str:
        if self.affected < self.processes:
            return f"{self.reason} (in {self.affected} of {self.processes} processes)"
        return self.reason


def summarize(snapshots: Iterable[MetricsSnapshot], now: datetime | None = None) -> dict[str, Summary]:
    """Every component any live process supervises, by name, at its worst."""
    found: dict[str, list[ComponentHealth]] = {}
    for snapshot in snapshots:
        for name, health in snapshot.health.items():
            found.setdefault(name, []).append(health)
    summaries: dict[str, Summary] = {}
    for name, reports in sorted(found.items()):
        worst = max(reports, key=lambda h: SEVERITY[h.status])
        affected = sum(1 for h in reports if h.status == worst.status)
        summaries[name] = Summary(worst.status, describe(worst, now), len(reports), affected)
    return summaries
