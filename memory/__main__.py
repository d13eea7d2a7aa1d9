"""`python -m memory`: run the memory updater (same as `antler run memory`)."""

from bus.launcher import launch
from memory.updater import run

raise SystemExit(launch("memory", run))
