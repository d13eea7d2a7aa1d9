"""The egress policy: the one place that decides where a run's network access may go.

`egress_policy(config, role)` gives a run its policy (the role's `egress`, else the deployment's);
the runner puts it in the run's context; `web_fetch`, `web_search` and `image_search` obey it, and
the sandbox tools send it with each command, the browser tools with each action, whose broker and
browser component enforce it through `access.egress_proxy`. `refusal` says whether a
host is allowed, `addresses` resolves it once (an operator's pinned `hosts` first, else the SSRF
guard's `resolve_public`), and `log_refusal` writes the line every refused connection gets.
"""

from __future__ import annotations

import logging

from access.addresses import resolve_public
from bus.messages import EgressPolicy
from config import AppConfig

log = logging.getLogger(__name__)

__all__ = [
    "EgressPolicy",
    "addresses",
    "domain_allowed",
    "egress_policy",
    "log_refusal",
    "refusal",
    "web_binding",
]


def egress_policy(config: AppConfig, role: str | None) -> EgressPolicy:
    """The policy of a run whose person has `role` (the default role for None or an unknown role).

    Without `egress.mode` or a role's own `egress`, commands keep `sandbox.allow_network` and the
    policy does not bind `web_fetch` (`binds_web` False): what every deployment did before it existed.
    """
    roles = config.access.roles
    name = role if role in roles else config.access.default_role
    rule = roles[name].egress
    hosts = dict(config.egress.hosts)
    if rule is not None:
        return EgressPolicy(
            mode=rule.mode, allow=rule.allow, hosts=hosts, source=f"access.roles.{name}.egress"
        )
    if config.egress.mode is not None:
        return EgressPolicy(mode=config.egress.mode, allow=config.egress.allow, hosts=hosts, source="egress")
    mode = "all" if config.sandbox.allow_network else "none"
    return EgressPolicy(mode=mode, hosts=hosts, source="sandbox.allow_network", binds_web=False)


def web_binding(policy: EgressPolicy | None) -> EgressPolicy | None:
    """`policy` when it limits the web tools and the browser (configured as `none` or `allowlist`),
    else None: they go where they went before the policy existed (public hosts)."""
    if policy is None or not policy.binds_web or policy.mode == "all":
        return None
    return policy


def domain_allowed(host: str, domains: list[str]) -> bool:
    """Whether `host` is one of `domains` or a subdomain of one (case and a trailing dot ignored)."""
    name = host.strip("[]").rstrip(".").lower()
    for domain in domains:
        domain = domain.strip().rstrip(".").lower()
        if domain and (name == domain or name.endswith("." + domain)):
            return True
    return False


def refusal(policy: EgressPolicy, host: str) -> str | None:
    """Why `policy` refuses a connection to `host`, or None when it may be tried (its addresses are
    checked next, by `addresses`)."""
    if policy.mode == "all":
        return None
    if policy.mode == "none":
        return f"the egress policy ({policy.source}) allows no network access"
    if domain_allowed(host, policy.allow):
        return None
    listed = ", ".join(policy.allow) or "nothing"
    return f"{host} is not on the egress allowlist ({policy.source}: {listed})"


async def addresses(policy: EgressPolicy, host: str, port: int, *, allow_private: bool = False) -> list[str]:
    """The addresses to connect to for `host`, resolved once: its pinned address (`egress.hosts`,
    the operator's choice, so private ones too), else public addresses only (unless `allow_private`).

    Raises:
        access.addresses.AddressRefused: a non-public address.
        access.addresses.UnresolvableHost: the name does not resolve.
    """
    pinned = policy.hosts.get(host.strip("[]").rstrip(".").lower())
    if pinned is not None:
        return [pinned]
    return await resolve_public(host.strip("[]"), port, allow_private=allow_private)


def log_refusal(where: str, run_id: str | None, host: str, port: int | None, reason: str) -> None:
    """The log line of a refused connection, naming the run that tried it."""
    target = f"{host}:{port}" if port is not None else host
    log.warning("%s egress refused %s (run %s): %s", where, target, run_id or "-", reason)
