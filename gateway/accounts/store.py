"""Accounts in KV `<prefix>_users`, one record per e-mail address.

Keys: `acct.<digest of the e-mail address>` for accounts (so creating one is
atomic: a second account for the same address finds the key taken), and
`secret.session` for the key signing session cookies when config gives none
(made once by whichever gateway or CLI needs it first; all then share it).

An account's `user_id` is whose threads, runs, files and memory it reaches:
the same ids bearer tokens name in `gateway.tokens`, so an account and a token
for one user id see the same things. Only the gateway and `antler user` write
this bucket.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from email_validator import EmailNotValidError, validate_email
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field

from bus import Bus
from bus.records import RecordStore, drop_keys, keys_matching
from gateway.accounts.errors import AccountExists, AccountNotFound, InvalidAccount
from gateway.accounts.passwords import hash_password

ACCOUNT_KEYS = "acct.>"
IDENTITY_PREFIX = "oidc."
SECRET_KEY = "secret.session"
INITIALIZED_KEY = "setup.initialized"
_USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}$")

Role = Literal["admin", "user"]


def _now() -> datetime:
    return datetime.now(UTC)


class Account(BaseModel):
    model_config = ConfigDict(extra="ignore")

    email: str
    user_id: str
    password_hash: str | None = Field(None, description="None: signs in only by single sign-on.")
    system_role: Role = "user"
    role: str | None = Field(None, description="The team role (access.roles); None = the default.")
    identities: dict[str, str] = Field(
        default_factory=dict, description="Identity provider -> the person's `sub` there."
    )
    name: str | None = None
    token_version: int = Field(0, description="Raised when the password changes: older sessions end.")
    needs_setup: bool = False
    created_at: datetime = Field(default_factory=_now)

    @property
    def key(self) -> str:
        return account_key(self.email)


def normalize_email(raw: str) -> str:
    """The address as accounts are keyed: checked for shape (not for deliverability), lower case."""
    try:
        found = validate_email(raw.strip(), check_deliverability=False)
    except EmailNotValidError as exc:
        raise InvalidAccount(f"{raw!r} is not an e-mail address: {exc}") from None
    return found.normalized.lower()


def account_key(email: str) -> str:
    return "acct." + hashlib.sha256(email.encode()).hexdigest()[:40]


def identity_key(provider: str, sub: str) -> str:
    """Where an identity provider's subject points to its account's key (subjects may be any string)."""
    return f"{IDENTITY_PREFIX}{provider}." + hashlib.sha256(sub.encode()).hexdigest()[:40]


def check_user_id(user_id: str) -> str:
    if not _USER_ID.match(user_id):
        raise InvalidAccount(
            f"user id {user_id!r} cannot be used: letters, digits and _ . @ + - only, at most 128"
        )
    return user_id


def new_user_id() -> str:
    return uuid.uuid4().hex


class AccountStore:
    """The accounts bucket; every method is one or a few KV round trips (no cache: always current)."""

    def __init__(self, bus: Bus, kv: KeyValue, bucket: str) -> None:
        self.bus = bus
        self.kv = kv
        self.bucket = bucket
        self.records = RecordStore(kv, Account)

    @classmethod
    async def open(cls, bus: Bus) -> AccountStore:
        """The bucket, created if this installation has none yet."""
        bucket = bus.subjects.bucket("users")
        try:
            kv = await bus.js.key_value(bucket)
        except BucketNotFoundError:
            kv = await bus.js.create_key_value(
                KeyValueConfig(bucket=bucket, history=1, storage=StorageType.FILE)
            )
        return cls(bus, kv, bucket)

    # -- reading ----------------------------------------------------------
    async def _get(self, key: str) -> tuple[Account, int] | None:
        return await self.records.get_with_revision(key)

    async def get(self, email: str) -> Account | None:
        try:
            key = account_key(normalize_email(email))
        except InvalidAccount:
            return None
        found = await self._get(key)
        return found[0] if found else None

    async def by_key(self, key: str) -> Account | None:
        found = await self._get(key) if key.startswith("acct.") else None
        return found[0] if found else None

    async def count(self) -> int:
        """How many accounts there are (asked of the server's subject index: no records read)."""
        return len(await keys_matching(self.bus.js, self.bucket, ACCOUNT_KEYS))

    async def all(self) -> list[Account]:
        accounts = []
        for key in await keys_matching(self.bus.js, self.bucket, ACCOUNT_KEYS):
            found = await self._get(key)
            if found:
                accounts.append(found[0])
        return sorted(accounts, key=lambda a: a.email)

    async def by_identity(self, provider: str, sub: str) -> Account | None:
        """The account an identity provider's subject was linked to."""
        try:
            entry = await self.kv.get(identity_key(provider, sub))
        except KeyNotFoundError:
            return None
        account = await self.by_key(entry.value.decode()) if entry.value else None
        if account is None or account.identities.get(provider) != sub:
            return None  # the account went, or was linked to another subject since
        return account

    # -- writing ----------------------------------------------------------
    async def create_linked(
        self, email: str, provider: str, sub: str, *, role: str | None = None, name: str | None = None
    ) -> Account:
        """A new account that signs in only through `provider` (no password)."""
        email = normalize_email(email)
        account = Account(
            email=email, user_id=new_user_id(), role=role, identities={provider: sub}, name=name
        )
        try:
            await self.kv.create(account.key, account.model_dump_json().encode())
        except KeyWrongLastSequenceError:
            raise AccountExists(f"{email} already has an account", email) from None
        await self.kv.put(identity_key(provider, sub), account.key.encode())
        return account

    async def link_identity(self, email: str, provider: str, sub: str) -> Account:
        """Let `provider`'s subject `sub` sign in as the account of `email` from now on."""
        account = await self.update(
            email,
            lambda a: a.model_copy(update={"identities": {**a.identities, provider: sub}}),
        )
        await self.kv.put(identity_key(provider, sub), account.key.encode())
        return account

    async def set_role(self, email: str, role: str, *, admin: bool) -> Account:
        """The account's team role, and with it whether it administers."""
        return await self.update(
            email,
            lambda a: a.model_copy(update={"role": role, "system_role": "admin" if admin else "user"}),
        )

    async def create(
        self,
        email: str,
        password: str,
        *,
        role: Role = "user",
        user_id: str | None = None,
    ) -> Account:
        """A new account (its password hashed); AccountExists if the address or user id is taken."""
        email = normalize_email(email)
        user_id = check_user_id(user_id) if user_id else new_user_id()
        if any(a.user_id == user_id for a in await self.all()):
            raise AccountExists(f"another account already has user id {user_id}", email)
        account = Account(
            email=email, user_id=user_id, password_hash=await hash_password(password), system_role=role
        )
        try:
            await self.kv.create(account.key, account.model_dump_json().encode())
        except KeyWrongLastSequenceError:
            raise AccountExists(f"{email} already has an account", email) from None
        return account

    async def update(self, email: str, change: Callable[[Account], Account]) -> Account:
        """Apply `change` with a compare-and-set (retried when someone wrote in between)."""
        key = account_key(normalize_email(email))
        for _ in range(20):
            found = await self._get(key)
            if found is None:
                raise AccountNotFound(email)
            account, revision = found
            new = change(account)
            try:
                await self.kv.update(key, new.model_dump_json().encode(), last=revision)
            except KeyWrongLastSequenceError:
                continue
            return new
        raise RuntimeError(f"could not update the account of {email}: too many concurrent writers")

    async def set_password(self, email: str, password: str, *, new_email: str | None = None) -> Account:
        """A new password (and sessions signed before it end); a new address moves the record."""
        password_hash = await hash_password(password)

        def changed(account: Account) -> Account:
            return account.model_copy(
                update={"password_hash": password_hash, "token_version": account.token_version + 1}
            )

        if new_email is None or normalize_email(new_email) == normalize_email(email):
            return await self.update(email, changed)
        current = await self.get(email)
        if current is None:
            raise AccountNotFound(email)
        moved = changed(current).model_copy(
            update={"email": normalize_email(new_email), "needs_setup": False}
        )
        try:
            await self.kv.create(moved.key, moved.model_dump_json().encode())
        except KeyWrongLastSequenceError:
            raise AccountExists(f"{moved.email} already has an account", moved.email) from None
        await drop_keys(self.bus.js, self.bucket, current.key)
        return moved

    async def remove(self, email: str) -> Account:
        """Delete the account (its sessions end with it); its user's threads and files stay."""
        account = await self.get(email)
        if account is None:
            raise AccountNotFound(email)
        # Purged, not marked deleted, so `count()` (the subject index) no longer sees it.
        await drop_keys(self.bus.js, self.bucket, account.key)
        return account

    async def claim_initialization(self) -> bool:
        """True once only: the first admin may be created by whoever claims this first."""
        try:
            await self.kv.create(INITIALIZED_KEY, _now().isoformat().encode())
        except KeyWrongLastSequenceError:
            return False
        return True

    async def release_initialization(self) -> None:
        await drop_keys(self.bus.js, self.bucket, INITIALIZED_KEY)

    async def session_secret(self) -> str:
        """The shared cookie signing key, made on first use."""
        try:
            entry = await self.kv.get(SECRET_KEY)
            if entry.value:
                return entry.value.decode()
        except KeyNotFoundError:
            pass
        try:
            await self.kv.create(SECRET_KEY, secrets.token_urlsafe(48).encode())
        except KeyWrongLastSequenceError:
            pass  # another process made it first: use theirs
        entry = await self.kv.get(SECRET_KEY)
        assert entry.value is not None
        return entry.value.decode()
