"""`python -m browser`: run the browser component (same as `antler run browser`)."""

from browser.service import run
from bus.launcher import launch

raise SystemExit(launch("browser", run))
