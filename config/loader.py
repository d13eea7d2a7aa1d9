"""Finding and loading config.yaml and extensions_config.json.

Search order for each file: an explicit path, then the environment variable
(`ANTLER_CONFIG_PATH` / `ANTLER_EXTENSIONS_CONFIG_PATH`), then the file in the
current directory. No file at all gives the defaults. Relative paths in
config.yaml (data dir, credentials, checkpoint file, sandbox dir, skills) are
relative to the file's own directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from config._env import Section
from config.app import AppConfig
from config.errors import ConfigFileNotFoundError, ConfigParseError, ConfigValidationError
from config.extensions import ExtensionsConfig

CONFIG_ENV = "ANTLER_CONFIG_PATH"
EXTENSIONS_ENV = "ANTLER_EXTENSIONS_CONFIG_PATH"
CONFIG_FILE = "config.yaml"
EXTENSIONS_FILE = "extensions_config.json"

S = TypeVar("S", bound=Section)


def find_file(explicit: str | os.PathLike[str] | None, env_var: str, filename: str) -> Path | None:
    """The config file to use, or None when there is none (defaults apply).

    Raises:
        ConfigFileNotFoundError: an explicitly named file (argument or env var) is missing.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigFileNotFoundError(path, "given explicitly")
        return path
    from_env = os.environ.get(env_var)
    if from_env:
        path = Path(from_env)
        if not path.is_file():
            raise ConfigFileNotFoundError(path, f"from ${env_var}")
        return path
    local = Path.cwd() / filename
    return local if local.is_file() else None


def load_config(path: str | os.PathLike[str] | None = None) -> AppConfig:
    """Load config.yaml by the search order; defaults when there is no file."""
    found = find_file(path, CONFIG_ENV, CONFIG_FILE)
    if found is None:
        return _build(AppConfig, {}, "defaults")
    try:
        raw = yaml.safe_load(found.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigParseError(found, str(exc)) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigParseError(
            found, f"the top level must be a mapping of sections, not {type(raw).__name__}"
        )
    config = _build(AppConfig, raw, str(found))
    _anchor_paths(config, found.resolve().parent)
    return config


def _anchor_paths(config: AppConfig, base: Path) -> None:
    """Relative paths in a config file are relative to the file, not to where a command runs.

    So `antler send -c ~/antler/config.yaml` from any directory finds the data dir (and with it the
    URL and credentials) of the `antler up` started next to that file.
    """
    if base == Path.cwd().resolve():
        return

    def anchored(value: str | None) -> str | None:
        return str(base / value) if value and not Path(value).expanduser().is_absolute() else value

    config.bus.data_dir = anchored(config.bus.data_dir) or config.bus.data_dir
    config.bus.credentials = anchored(config.bus.credentials)
    config.runner.checkpoint_db = anchored(config.runner.checkpoint_db)
    config.sandbox.data_dir = anchored(config.sandbox.data_dir)
    config.sandbox.toolbox.path = anchored(config.sandbox.toolbox.path)
    config.skills.path = anchored(config.skills.path) or config.skills.path


def extensions_from(raw: dict[str, Any], source: str) -> ExtensionsConfig:
    """An extensions config from its JSON as written (published on the bus, say); `source` names
    it in errors.

    Raises:
        ConfigValidationError: `raw` is not a valid extensions config.
    """
    return _build(ExtensionsConfig, raw, source)


def load_extensions(path: str | os.PathLike[str] | None = None) -> ExtensionsConfig:
    """Load extensions_config.json by the search order; empty when there is no file."""
    found = find_file(path, EXTENSIONS_ENV, EXTENSIONS_FILE)
    if found is None:
        return _build(ExtensionsConfig, {}, "defaults")
    try:
        raw = json.loads(found.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigParseError(found, str(exc)) from None
    if not isinstance(raw, dict):
        raise ConfigParseError(found, "the top level must be a JSON object")
    return _build(ExtensionsConfig, raw, str(found))


def extensions_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where extensions_config.json is, or would be written when none exists yet."""
    if explicit is not None:
        return Path(explicit)
    if os.environ.get(EXTENSIONS_ENV):
        return Path(os.environ[EXTENSIONS_ENV])
    return Path.cwd() / EXTENSIONS_FILE


def _build(cls: type[S], raw: dict[str, Any], source: str) -> S:
    try:
        config = cls.model_validate(raw)
    except ValidationError as exc:
        raise ConfigValidationError(source, [_describe(err) for err in exc.errors()]) from None
    config._bind("", None if source == "defaults" else source)
    return config


def _describe(error: Any) -> tuple[str, str]:
    path = ""
    for part in error["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = str(part)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field (check the spelling against config.example.yaml)"
    elif "input" in error and error["type"] not in ("missing",) and not isinstance(error["input"], dict):
        message += f" (got {error['input']!r})"
    return path, message
