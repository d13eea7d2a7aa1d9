"""Errors of building a chat model from config.

    ModelConfigError          no such model / no model configured / bad provider fields
    └── ProviderNotInstalled  (also ImportError) `use:` names a module that is not installed

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
