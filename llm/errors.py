"""Errors of building a chat model from config.

    ModelConfigError          no such model / no model configured / bad provider fields
    └── ProviderNotInstalled  (also ImportError) `use:` names a module that is not installed
    ModelCallFailed           a call failed transiently on every try (rate limit, 5xx, timeout, connection)

Missing `$ENV` values surface as `config.MissingEnvError` (naming field and variable).
"""

from __future__ import annotations


class ModelConfigError(Exception):
    pass


class ProviderNotInstalled(ModelConfigError, ImportError):
    def __init__(self, use: str, module: str, package: str) -> None:
        self.use = use
        self.package = package
        super().__init__(f"model provider {use!r} needs the {module!r} module: pip install {package}")


class ModelCallFailed(Exception):
    """A model call failed transiently on every try (`llm.guard`); `cause` is the last failure."""

    def __init__(self, model: str, attempts: int, cause: BaseException) -> None:
        self.model = model
        self.attempts = attempts
        self.cause = cause
        from llm.retry import describe

        tries = "once" if attempts == 1 else f"{attempts} times"
        super().__init__(
            f"the model {model!r} could not be reached (tried {tries}; last: {describe(cause)}); "
            "please try again in a moment"
        )
