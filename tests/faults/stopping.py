"""How long a NATS outage lasts in the fault scenarios, and what a clean stop of `antler up` is."""

from __future__ import annotations

import time

from tests.faults.budget import STOP_TIMEOUT
from tests.support.antler_up import AntlerUp

OUTAGE = 3.0  # seconds the external server stays down: longer than a redelivery (ack wait)
DRAIN = 30.0  # antler up's own drain timeout: a clean stop takes less


async def stopped_cleanly(up: AntlerUp) -> list[str]:
    """SIGINT; what went wrong (nothing: it exited 0 within its drain time, no component stuck)."""
    began = time.monotonic()
    code = await up.stop(STOP_TIMEOUT)
    took = time.monotonic() - began
    problems = []
    if code != 0:
        problems.append(f"antler up exited with {code} after SIGINT (None: still running after {took:.0f}s)")
    elif took > DRAIN:
        problems.append(f"antler up took {took:.1f}s to stop, more than its drain time ({DRAIN:g}s)")
    problems += [f"at stop: {line.strip()}" for line in up.log().splitlines() if "did not drain" in line]
    return problems
