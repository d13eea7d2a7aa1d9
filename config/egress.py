"""The `egress` section: what network the agent itself may reach, from sandboxed commands, the web
tools (`web_fetch`, `web_search`, `image_search`) and the browser.

One policy for all of them (`access.egress` turns it into a run's policy): `none`, `allowlist`
(these domains and their subdomains), or `all`; a role may have its own (`access.roles.<role>.egress`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from config._env import Section

EgressMode = Literal["none", "allowlist", "all"]

# A host name as an allowlist holds it: labels of letters, digits and hyphens (IDNs in their xn-- form).
_DOMAIN = re.compile(
    r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$"
)


def normalize_domain(value: str) -> str:
    """`value` as the allowlist compares it: lower case, no trailing dot, `*.` dropped (subdomains are
    always included).

    Raises:
        ValueError: it is not a bare domain name (a URL, a path, a port, an address with a mask ...).
    """
    name = value.strip().lower().rstrip(".")
    name = name.removeprefix("*.")
    try:
        name = name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError:
        raise ValueError(f"{value!r} is not a domain name") from None
    if not _DOMAIN.match(name):
        raise ValueError(f"{value!r} is not a domain name (write example.com, not a URL or host:port)")
    return name


class _Allowlist(Section):
    allow: list[str] = Field(
        default_factory=list, description="Domains reachable in allowlist mode; each includes its subdomains."
    )

    @field_validator("allow")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(normalize_domain(d) for d in value))


class EgressRule(_Allowlist):
    """Where the agent's network access may go: a mode and, for `allowlist`, the domains."""

    mode: EgressMode = Field(
        description="none: no network; allowlist: only `allow` (and subdomains); all: any host "
        "(web_fetch still only public addresses)."
    )


class EgressConfig(_Allowlist):
    """The deployment's egress policy (`egress`); a role's `egress` replaces it for that role's people."""

    mode: EgressMode | None = Field(
        None,
        description="none | allowlist | all, for sandboxed commands, the web tools and the browser alike. "
        "Unset: commands follow sandbox.allow_network (no network by default); the web tools and the "
        "browser reach any public host.",
    )
    hosts: dict[str, str] = Field(
        default_factory=dict,
        description="Names pinned to an address (an internal mirror): never looked up, and reachable "
        "even when private, since the operator chose them. A name must still be allowed.",
    )

    @field_validator("hosts")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        pinned: dict[str, str] = {}
        for name, address in value.items():
            try:
                pinned[normalize_domain(name)] = str(ipaddress.ip_address(address.strip()))
            except ValueError as exc:
                raise ValueError(f"hosts.{name}: {exc}") from None
        return pinned
