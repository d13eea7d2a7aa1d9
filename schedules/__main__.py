"""`python -m schedules`: run the scheduler (same as `antler run scheduler`)."""

from bus.launcher import launch
from schedules.scheduler import run

raise SystemExit(launch("scheduler", run))
