"""Errors of the agents package.

    AgentError
    ├── ModelConfigError       no such model / no model configured / bad provider fields
    │   └── ProviderNotInstalled (also ImportError)  `use:` names a module that is not installed
    ├── ToolConfigError        a `tools[].use` that cannot be imported
    └── ModelUnavailable       the model did not answer (unreachable, timeout, rate limit, 5xx)

Missing `$ENV` values surface as `config.MissingEnvError` (naming field and variable).
"""

from __future__ import annotations


class AgentError(Exception):
    pass


class ModelConfigError(AgentError):
    pass


class ProviderNotInstalled(ModelConfigError, ImportError):
    def __init__(self, use: str, module: str, package: str) -> None:
        self.use = use
        self.package = package
        super().__init__(f"model provider {use!r} needs the {module!r} module: pip install {package}")


class ToolConfigError(AgentError):
    pass


class ModelUnavailable(AgentError):
    def __init__(self, model: str, cause: Exception) -> None:
        self.model = model
        self.cause = cause
        detail = str(cause).splitlines()[0][:200] if str(cause) else ""
        reason = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
        super().__init__(f"the model {model!r} could not be reached ({reason}); please try again in a moment")
