"""`extensions_config.json`: MCP servers and skill switches, in DeerFlow's shape."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from config._env import Section


class McpServerConfig(Section):
    model_config = ConfigDict(extra="allow")

    enabled: bool = True
    type: Literal["stdio", "sse", "http", "streamable_http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="$NAME values resolve at use.")
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: dict[str, Any] | None = None
    description: str = ""


class SkillState(Section):
    enabled: bool = True


class ExtensionsConfig(Section):
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict, alias="mcpServers")
    skills: dict[str, SkillState] = Field(default_factory=dict)

    def skill_enabled(self, name: str) -> bool:
        """Skills not mentioned in the file are enabled."""
        state = self.skills.get(name)
        return state.enabled if state else True


def write_extensions_config(raw: dict[str, Any], path: str | os.PathLike[str]) -> ExtensionsConfig:
    """Validate `raw` (the file's JSON, `$NAME` references kept) and write it atomically.

    Written from the raw form, never from a loaded config: loading resolves `$NAME`
    values, and writing those back would put secrets into the file.

    Raises:
        pydantic.ValidationError: `raw` is not a valid extensions config.
    """
    validated = ExtensionsConfig.model_validate(raw)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".extensions-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(raw, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return validated


def read_raw_extensions(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's JSON as written (empty when there is no file yet)."""
    target = Path(path)
    if not target.is_file():
        return {"mcpServers": {}, "skills": {}}
    data = json.loads(target.read_text(encoding="utf-8") or "{}")
    return data if isinstance(data, dict) else {}
