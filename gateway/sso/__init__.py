"""Single sign-on with OpenID Connect: the relying party (`oidc`), the state cookie that carries a
sign-in across the provider's redirect (`state`), and its errors."""

from gateway.sso.errors import BadIdToken, NotAllowed, ProviderUnreachable, SignInRefused, SSOError
from gateway.sso.oidc import Authorization, Identity, OIDCClient
from gateway.sso.state import PendingSignIn, StateCookies

__all__ = [
    "Authorization",
    "BadIdToken",
    "Identity",
    "NotAllowed",
    "OIDCClient",
    "PendingSignIn",
    "ProviderUnreachable",
    "SSOError",
    "SignInRefused",
    "StateCookies",
]
