"""What can go wrong with accounts.

AccountError
├── InvalidAccount (ValueError)   a malformed e-mail address, a short password, a bad user id
├── AccountExists                 that e-mail address (or user id) has an account already
└── AccountNotFound (LookupError) no account has that e-mail address
"""

from __future__ import annotations


class AccountError(Exception):
    """Base of the accounts errors; `str()` is a sentence a person can act on."""


class InvalidAccount(AccountError, ValueError):
    pass


class AccountExists(AccountError):
    def __init__(self, message: str, email: str) -> None:
        super().__init__(message)
        self.email = email


class AccountNotFound(AccountError, LookupError):
    def __init__(self, email: str) -> None:
        super().__init__(f"no account has the e-mail address {email}")
        self.email = email
