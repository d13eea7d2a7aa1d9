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

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2, exclude_none=True)


def write_extensions_config(config: ExtensionsConfig, path: str | os.PathLike[str]) -> None:
    """Write atomically (temp file + rename), so readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(config.to_json())
    fd, tmp = tempfile.mkstemp(prefix=".extensions-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
