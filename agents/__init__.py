"""The agent side of Antler: the agent runner, the subagent executor and the threads service.

antler run runner          # or: python -m agents
antler run subagents

- `runner/`: the runner component (`agents.runner.run`); `threads/`: the threads service it
  serves; `subagents/`: the subagent executor (`agents.subagents.run`) and the `task` tool.
- `graph/`: the lead agent (`agents.graph.lead.build_lead_agent`), its prompt, state and
  middlewares; `tools/`: the agent's tools.
- Shared by them: `context` (run options and runtime context), `follow_up` (a run started after
  another: a background report, a goal continuation), `background_stop` (a deleted thread's
  background tasks stopped), `errors`, `events` (stream
  parts to run events), `telemetry`, `checkpoints` (with `sqlite_saver`), `loader`.

Importing this package is cheap on purpose (only run context and errors, no LangChain): import
what you need from its modules.
"""

from agents.context import RunContext, RunOptions
from agents.errors import AgentError, ModelConfigError, ProviderNotInstalled, ToolConfigError

__all__ = [
    "AgentError",
    "ModelConfigError",
    "ProviderNotInstalled",
    "RunContext",
    "RunOptions",
    "ToolConfigError",
]
