"""The run's egress policy (`access.egress`) for the search tools: which provider hosts they may ask.

`web_search` and `image_search` send the model's query, which a prompt injection can fill with the
user's data, to a provider; so a binding policy holds them as it holds `web_fetch`: `none` asks no
provider, `allowlist` only one whose host is listed (its pinned `egress.hosts` address used), and
every connection a request makes, redirects included, is checked again (`checked_resolver`).
"""

from __future__ import annotations

from access.addresses import AddressRefused, UnresolvableHost, resolve_public
from access.egress import refusal
from access.egress import web_binding as binding
from agents.tools.community._pinned import CheckedResolver
from agents.tools.community.errors import EgressRefused, ProviderUnreachable
from bus.messages import EgressPolicy


def check_host(provider: str, host: str, policy: EgressPolicy | None) -> None:
    """Nothing when the run's `policy` lets the tool reach `host`.

    Raises:
        EgressRefused: the policy refuses it (the tools' guard logs it with the run).
    """
    bound = binding(policy)
    if bound is None:
        return
    reason = refusal(bound, host)
    if reason is not None:
        raise EgressRefused(provider, host.strip("[]").rstrip(".").lower(), reason)


def checked_resolver(provider: str, policy: EgressPolicy) -> CheckedResolver:
    """A resolver for `_pinned.CheckedTransport` holding every connection to `policy`: a host it
    refuses is never looked up, a pinned one goes to its address; others resolve as usual (a
    provider is the operator's choice, so a private address, a self-hosted SearXNG, is fine)."""

    async def resolve(host: str, port: int) -> list[str]:
        check_host(provider, host, policy)
        pinned = policy.hosts.get(host.strip("[]").rstrip(".").lower())
        if pinned is not None:
            return [pinned]
        try:
            return await resolve_public(host.strip("[]"), port, allow_private=True)
        except (UnresolvableHost, AddressRefused) as exc:
            raise ProviderUnreachable(provider, host, f"cannot resolve the name: {exc}") from None

    return resolve
