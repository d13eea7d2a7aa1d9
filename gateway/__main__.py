"""`python -m gateway`: run the HTTP gateway (same as `antler run gateway`)."""

from bus.launcher import launch
from gateway.server import run

raise SystemExit(launch("gateway", run))
