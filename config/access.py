"""Teams: single sign-on providers (OpenID Connect) and roles that limit what a person may use.

`gateway.auth.oidc` lists the identity providers people sign in with; `access` defines the roles
(`admin`, `member` and any an operator adds), which models, tools (by name, tool group or
`mcp:<server>`), skills and custom agents each may use, who gets which role (a provider's groups,
chat platforms' unlinked users), (The audit trail's retention is `bus.audit_max_age_days`.)
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from config._env import Section
from config.egress import EgressRule

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ANY = "*"


class OIDCProviderConfig(Section):
    """One OpenID Connect identity provider (authorization code with PKCE, discovery, JWKS)."""

    name: str = Field(description="Its id in URLs: /api/v1/auth/oauth/<name>, /api/v1/auth/callback/<name>.")
    display_name: str | None = Field(None, description="What the sign-in page's button says.")
    issuer: str = Field(description="The issuer URL; <issuer>/.well-known/openid-configuration is read.")
    client_id: str
    client_secret: str | None = Field(None, description="e.g. $OIDC_CLIENT_SECRET; unset = a public client.")
    token_endpoint_auth_method: str = Field(
        "client_secret_basic", description="client_secret_basic, client_secret_post or none."
    )
    scopes: list[str] = Field(default_factory=lambda: ["openid", "email", "profile"])
    redirect_uri: str | None = Field(
        None,
        description="The callback URL registered at the provider; unset = this gateway's "
        "<origin>/api/v1/auth/callback/<name> as the browser reached it.",
    )
    create_accounts: bool = Field(True, description="A first sign-in creates the account.")
    require_verified_email: bool = Field(
        True, description="Link to or create an account by e-mail only when the provider says it is verified."
    )
    allowed_email_domains: list[str] = Field(
        default_factory=list, description="Only these domains may sign in; empty = any."
    )
    groups_claim: str = Field("groups", description="The claim listing the person's groups.")
    role_map: dict[str, str] = Field(
        default_factory=dict,
        description="Group -> role; the first group (in this map's order) the person has decides; "
        "none = the account's assigned role, else access.default_role.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("a provider name is letters, digits, _ and - only (it goes in URLs)")
        return value

    @field_validator("scopes")
    @classmethod
    def _openid(cls, value: list[str]) -> list[str]:
        return value if "openid" in value else ["openid", *value]

    @property
    def label(self) -> str:
        return self.display_name or self.name


class BudgetConfig(Section):
    """What one person with the role may spend, per UTC day and month (access.usage); null = no limit.
    Cost counts only models with prices (models[].input_price_per_million, output_price_per_million)."""

    tokens_per_day: int | None = Field(
        None, ge=0, description="Tokens (prompt and answer) a person may use a day."
    )
    tokens_per_month: int | None = Field(None, ge=0, description="Tokens a person may use a calendar month.")
    cost_per_day: float | None = Field(
        None, ge=0, description="Cost (models' prices) a person may run up a day."
    )
    cost_per_month: float | None = Field(None, ge=0, description="Cost a person may run up a calendar month.")

    @property
    def limited(self) -> bool:
        return any(
            v is not None
            for v in (self.tokens_per_day, self.tokens_per_month, self.cost_per_day, self.cost_per_month)
        )


class RoleConfig(Section):
    """What people with this role may use; `["*"]` = everything (the default for each list)."""

    description: str = ""
    admin: bool = Field(False, description="May administer: roles, MCP servers, skills, the audit trail.")
    models: list[str] = Field(default_factory=lambda: [ANY], description="Model names; `!<name>` denies one.")
    tools: list[str] = Field(
        default_factory=lambda: [ANY],
        description="Tool names, tool groups (`group:<name>`) or MCP servers (`mcp:<server>`); "
        'one starting with `!` denies what it names (`["*", "!mcp:github"]`).',
    )
    skills: list[str] = Field(default_factory=lambda: [ANY], description="Skill names; `!<name>` denies one.")
    agents: list[str] = Field(
        default_factory=lambda: [ANY], description="Custom agents' names; `!<name>` denies one."
    )
    budget: BudgetConfig = Field(
        default_factory=lambda: BudgetConfig(), description="Per-person tokens and cost a day and a month."
    )
    egress: EgressRule | None = Field(
        None, description="The role's own egress policy (sandboxed commands, web_fetch); unset = `egress`."
    )


def _default_roles() -> dict[str, RoleConfig]:
    return {
        "admin": RoleConfig(description="Everything, and administration", admin=True),
        "member": RoleConfig(description="Every model, tool and skill"),
    }


class AccessConfig(Section):
    roles: dict[str, RoleConfig] = Field(default_factory=_default_roles)
    default_role: str = Field("member", description="The role of a person no rule gives another.")
    channel_roles: dict[str, str] = Field(
        default_factory=dict,
        description="Role of chat users not linked to an account, per platform (telegram, slack, ...); "
        "unset = default_role.",
    )
    connect_code_minutes: float = Field(10.0, gt=0, description="How long a /connect code may be redeemed.")
    audited_tools: list[str] = Field(
        default_factory=lambda: ["bash", "write_file", "str_replace", "group:mcp"],
        description="Tool calls written to the audit trail (who, run, tool, arguments' digest, outcome): "
        'names or `group:<tool group>`; ["*"] = every call, [] = none. Refused calls always are.',
    )

    @model_validator(mode="after")
    def _roles_known(self) -> AccessConfig:
        for name in self.roles:
            if not _NAME.match(name):
                raise ValueError(f"role name {name!r}: letters, digits, _ and - only")
        self.roles.setdefault("admin", RoleConfig(description="Everything, and administration", admin=True))
        named = {"default_role": self.default_role} | {
            f"channel_roles.{k}": v for k, v in self.channel_roles.items()
        }
        for where, role in named.items():
            if role not in self.roles:
                raise ValueError(f"{where}: no role {role!r} (roles: {', '.join(self.roles)})")
        return self
