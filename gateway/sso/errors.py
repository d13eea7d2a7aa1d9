"""What can go wrong signing in through an identity provider.

SSOError
├── ProviderUnreachable   discovery, JWKS, token or userinfo endpoint did not answer (a 502)
├── SignInRefused         the provider refused the code (replayed, expired, wrong client) or said error=
├── BadIdToken            the ID token failed a check: signature, issuer, audience, expiry, nonce
└── NotAllowed            the identity is valid but may not have an account here (domain, unverified)
"""

from __future__ import annotations


class SSOError(Exception):
    """Base of the SSO errors; `code` is what the sign-in page is told (`/?sso_error=<code>`)."""

    code = "sso_failed"


class ProviderUnreachable(SSOError):
    code = "sso_unreachable"


class SignInRefused(SSOError):
    code = "sso_failed"


class BadIdToken(SSOError):
    code = "sso_bad_token"


class NotAllowed(SSOError):
    code = "sso_not_allowed"
