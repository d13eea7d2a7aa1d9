"""Errors of the agents package.

    AgentError
    ├── ToolConfigError        a `tools[].use` that cannot be imported
    ├── UnknownAgent           a run's `agent_name` is not one of the user's custom agents
    └── ModelUnavailable       the model did not answer (unreachable, timeout, rate limit, 5xx)

A model that cannot be built from config raises `llm.ModelConfigError` (re-exported here);
missing `$ENV` values surface as `config.MissingEnvError` (naming field and variable).
"""

from __future__ import annotations

from llm.errors import ModelConfigError, ProviderNotInstalled

__all__ = [
    "AgentError",
    "ModelConfigError",
    "ModelUnavailable",
    "ProviderNotInstalled",
    "ToolConfigError",
    "UnknownAgent",
]


class AgentError(Exception):
    pass


class ToolConfigError(AgentError):
    pass


class UnknownAgent(AgentError):
    pass


class ModelUnavailable(AgentError):
    def __init__(self, model: str, cause: BaseException, attempts: int = 1) -> None:
        self.model = model
        self.cause = cause
        self.attempts = attempts
        detail = str(cause).splitlines()[0][:200] if str(cause) else ""
        reason = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
        if attempts > 1:
            reason = f"tried {attempts} times; last: {reason}"
        super().__init__(f"the model {model!r} could not be reached ({reason}); please try again in a moment")
