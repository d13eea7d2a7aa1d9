"""`python -m sandbox`: run the sandbox broker (same as `antler run sandbox`)."""

from bus.launcher import launch
from sandbox.broker import run

raise SystemExit(launch("sandbox", run))
