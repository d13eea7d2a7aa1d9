"""Where Chromium may connect: every request it makes goes through this proxy, which refuses
loopback, private, link-local (cloud metadata) and other non-public addresses unless allowed.

Why a proxy and not Playwright's request routing: routing sees a redirect's first URL only and
Chromium resolves names itself, so a public page could redirect, or a name re-resolve (DNS
rebinding), to 169.254.169.254. Here the proxy resolves each host once, checks every address and
connects to the address it checked; redirects, subresources, WebSockets and `fetch()` from a page
are new connections through it. The proxy is the sandbox's (`access.egress_proxy`), with a policy
letting any public host through. Chromium is started with `--proxy-server` pointing here and
`--proxy-bypass-list=<-loopback>`, so not even loopback goes around it.

A run whose egress policy limits it (`access.egress.web_binding`: an allowlist) gets pages of their
own, each with its own proxy holding that policy (`run_proxy`, a Playwright context's `proxy`).
"""

from __future__ import annotations

from access.addresses import AddressRefused, UnresolvableHost, resolve_public
from access.egress_proxy import EgressProxy as SharedProxy
from bus.messages import EgressPolicy

# The browser's own policy: any host, the address guard alone deciding (`browser.allow_private_networks`).
ANYWHERE = EgressPolicy(mode="all", source="browser")


class Refused(Exception):
    """The address is not one the browser may open."""

    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: {reason}")


async def checked_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    """`host`'s addresses, resolved once, when the policy (`access.addresses`) allows every one.

    Raises:
        Refused: a non-public address (unless `allow_private`), or a name that does not resolve.
    """
    host = host.strip("[]")
    try:
        return await resolve_public(host, port, allow_private=allow_private)
    except UnresolvableHost as exc:
        raise Refused(host, f"the name does not resolve ({exc.detail})") from None
    except AddressRefused as exc:
        raise Refused(
            host,
            f"{exc.address} is {exc.reason}; the browser opens only public web pages, "
            "never non-public addresses",
        ) from None


def run_proxy(policy: EgressPolicy, run_id: str | None, allow_private: bool) -> SharedProxy:
    """A proxy holding a run's egress policy (`access.egress`) for the pages opened for it: only
    the allowed domains (their pinned `egress.hosts` addresses), each host's addresses checked, and
    a tunnel's TLS must name the host CONNECT named; refusals logged with the run."""
    return SharedProxy(policy, where="browser", run_id=run_id, allow_private=allow_private)


class EgressProxy(SharedProxy):
    """The shared filtering proxy (`access.egress_proxy`) on 127.0.0.1, letting Chromium reach any
    public host (every non-public address refused unless `allow_private`)."""

    def __init__(self, allow_private: bool) -> None:
        super().__init__(ANYWHERE, where="browser", allow_private=allow_private)
