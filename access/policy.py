"""What a role lets a person use: models, tools (by name, `group:<tool group>`, `mcp:<server>`), skills and
custom agents. `["*"]` in a list allows everything of its kind; an entry starting with `!` denies what
it names, whatever else allows it (tools `["*", "!mcp:github"]`: every tool but the github MCP
server's; models `["*", "!big"]`: every model but big)."""

from __future__ import annotations

from dataclasses import dataclass

from config import AppConfig, RoleConfig
from config.access import ANY


def _allows(rules: list[str], *names: str) -> bool:
    """Whether `rules` allow something known by any of `names`: none of them denied (`!name`), and
    everything (`*`) or one of them allowed."""
    if any(f"!{n}" in rules for n in names):
        return False
    return ANY in rules or any(n in rules for n in names)


@dataclass(frozen=True)
class Permissions:
    role: str
    config: RoleConfig

    @property
    def admin(self) -> bool:
        return self.config.admin

    def model(self, name: str) -> bool:
        return _allows(self.config.models, name)

    def tool(self, name: str, group: str | None = None, mcp_server: str | None = None) -> bool:
        named = [name]
        if group is not None:
            named.append(f"group:{group}")
        if mcp_server is not None:
            named.append(f"mcp:{mcp_server}")
        return _allows(self.config.tools, *named)

    @property
    def every_tool(self) -> bool:
        """Whether the role offers every tool (nothing denied)."""
        return ANY in self.config.tools and not any(r.startswith("!") for r in self.config.tools)

    def skill(self, name: str) -> bool:
        return _allows(self.config.skills, name)

    def agent(self, name: str) -> bool:
        return _allows(self.config.agents, name)

    def refusal_for_model(self, name: str) -> str | None:
        """Why a run on model `name` is refused for this role; None when it may run."""
        if self.model(name):
            return None
        rules = self.config.models
        allowed = ", ".join(r for r in rules if not r.startswith("!")) or "none"
        denied = ", ".join(r[1:] for r in rules if r.startswith("!"))
        uses = f"{allowed}; not {denied}" if denied else allowed
        return f"model: your role {self.role!r} may not use model {name!r} (it may use: {uses})"

    def summary(self) -> dict[str, object]:
        c = self.config
        return {
            "role": self.role,
            "admin": c.admin,
            "models": list(c.models),
            "tools": list(c.tools),
            "skills": list(c.skills),
            "agents": list(c.agents),
        }


def permissions_for(config: AppConfig, role: str | None) -> Permissions:
    """The permissions of `role` (the default role for None or a role config no longer has)."""
    roles = config.access.roles
    name = role if role in roles else config.access.default_role
    return Permissions(name, roles[name])
