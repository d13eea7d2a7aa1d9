"""The lead agent, its middlewares, model factory and tools, and the runner that runs it on the bus.

antler run runner          # or: python -m agents
"""

from agents.context import RunContext, RunOptions
from agents.errors import AgentError, ModelConfigError, ProviderNotInstalled, ToolConfigError
from agents.events import StreamTranslator, jsonable
from agents.lead import AgentCache, build_lead_agent, build_middlewares
from agents.models import create_chat_model
from agents.prompt import build_system_prompt
from agents.runner import Runner, run
from agents.state import ThreadState

__all__ = [
    "AgentCache",
    "AgentError",
    "ModelConfigError",
    "ProviderNotInstalled",
    "RunContext",
    "RunOptions",
    "Runner",
    "StreamTranslator",
    "ThreadState",
    "ToolConfigError",
    "build_lead_agent",
    "build_middlewares",
    "build_system_prompt",
    "create_chat_model",
    "jsonable",
    "run",
]
