"""Password hashes (Argon2id), computed off the event loop.

The parameters are OWASP's recommended minimum for Argon2id (19 MiB, 2 passes, 1 lane): a
sign-in costs tens of milliseconds rather than argon2-cffi's default half second, which on a
small shared machine would make the gateway itself the bottleneck. Hashes record their own
parameters, so raising them later still verifies older ones.
"""

from __future__ import annotations

import asyncio
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from gateway.accounts.errors import InvalidAccount

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024

_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def check_password(password: str) -> str:
    """The password if it is acceptable, else InvalidAccount saying why."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidAccount(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidAccount(f"a password may have at most {MAX_PASSWORD_LENGTH} characters")
    return password


async def hash_password(password: str) -> str:
    return await asyncio.to_thread(_hasher.hash, check_password(password))


@cache
def _decoy() -> str:
    return _hasher.hash("no account has this password")


async def verify_password(password: str, password_hash: str | None) -> bool:
    """Whether `password` matches; with no hash (no such account) it still costs a verification, so
    the time taken does not tell which e-mail addresses have accounts."""

    def verify() -> bool:
        try:
            # An account without a password (single sign-on only) matches none, not even the decoy's.
            return _hasher.verify(password_hash or _decoy(), password) and bool(password_hash)
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(verify)
