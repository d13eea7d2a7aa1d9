"""Accounts: people who sign in to the gateway with an e-mail address and a password.

Kept on the bus (KV `<prefix>_users`), so every gateway process and `antler
user` see the same accounts; passwords are Argon2id hashes; a signed-in
browser holds an HttpOnly session cookie and a CSRF token (`sessions`);
failed sign-ins are counted on the bus too (`lockout`).
"""

from gateway.accounts.errors import AccountError, AccountExists, AccountNotFound, InvalidAccount
from gateway.accounts.lockout import LoginLockout
from gateway.accounts.passwords import MIN_PASSWORD_LENGTH, check_password, hash_password, verify_password
from gateway.accounts.sessions import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE, SessionClaim, Sessions
from gateway.accounts.store import Account, AccountStore, account_key, normalize_email

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "MIN_PASSWORD_LENGTH",
    "SESSION_COOKIE",
    "Account",
    "AccountError",
    "AccountExists",
    "AccountNotFound",
    "AccountStore",
    "InvalidAccount",
    "LoginLockout",
    "SessionClaim",
    "Sessions",
    "account_key",
    "check_password",
    "hash_password",
    "normalize_email",
    "verify_password",
]
