"""`python -m agents`: run the agent runner (same as `antler run runner`)."""

from agents.runner import run
from bus.launcher import launch

raise SystemExit(launch("runner", run))
