"""The agent runner: the lead agent, its middlewares, model factory and tools, run on the bus.

antler run runner          # or: python -m agents

Importing this package is cheap on purpose (only run context and errors, no
LangChain): import what you need from its modules, e.g. `agents.runner.run`
(the component), `agents.graph.lead.build_lead_agent`, `llm.models.create_chat_model`,
`agents.threads.serve_threads` (the threads service), `agents.tools.sandbox`.
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
