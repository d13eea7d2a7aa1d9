"""`python -m channels`: run the chat router (same as `antler run router`)."""

from bus.launcher import launch
from channels.router import run

raise SystemExit(launch("router", run))
