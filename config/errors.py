"""Errors raised while finding, parsing and using configuration.

ConfigError
├── ConfigFileNotFoundError   (also FileNotFoundError) a named config file does not exist
├── ConfigParseError          the file is not valid YAML / JSON
├── ConfigValidationError     (also ValueError) fields with wrong types or values
└── MissingEnvError           (also LookupError) a `$NAME` value whose variable is unset,
                              raised when the value is first used
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """Base of every configuration error."""


class ConfigFileNotFoundError(ConfigError, FileNotFoundError):
    def __init__(self, path: Path, how: str) -> None:
        self.path = path
        self.how = how
        super().__init__(f"config file {path} ({how}) does not exist")

    def __str__(self) -> str:
        return str(self.args[0])


class ConfigParseError(ConfigError):
    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"{path}: cannot parse: {detail}")


class ConfigValidationError(ConfigError, ValueError):
    """Carries one `(field_path, message)` pair per problem."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} invalid field{'s' if len(problems) != 1 else ''}:"]
        lines += [f"  {path or '(top level)'}: {message}" for path, message in problems]
        super().__init__("\n".join(lines))


class MissingEnvError(ConfigError, LookupError):
    def __init__(self, field: str, variable: str, source: str | None = None) -> None:
        self.field = field
        self.variable = variable
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}{field} is set to ${variable}, but the environment variable {variable} is not set; "
            f"export {variable}=... or change {field}"
        )

    def __str__(self) -> str:
        return str(self.args[0])
