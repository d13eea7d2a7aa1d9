"""`python -m agentproto`: run the agent-protocol host (same as `antler run agentproto`)."""

from agentproto.host import run
from bus.launcher import launch

raise SystemExit(launch("agentproto", run))
