"""Thread and run ids: which ones the gateway accepts, decided here and nowhere else.

Ids become KV keys, subject tokens and object-store path segments. NATS refuses
keys like `..`, `a b` or `*` (the gateway used to answer those with a 500), and
`bus.subjects.safe_token` maps every character outside `[A-Za-z0-9_-]` to `_`,
so `a.b` and `a_b` would share one thread's files. An id is therefore 1-128 of
exactly the characters `safe_token` keeps: it maps to itself everywhere. UUIDs
(what the gateway, the SDKs and the chat channels make) fit.

A path naming an id outside that rule is answered like any id that does not
exist (404): no such thread or run can exist.
"""

from __future__ import annotations

import re

from fastapi import HTTPException

MAX_ID_LENGTH = 128
_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_ID_LENGTH}}}")
ID_PATTERN = f"^{_ID.pattern}$"  # the same rule, for OpenAPI


def is_valid_id(value: str) -> bool:
    """Whether `value` can be a thread or run id."""
    return _ID.fullmatch(value) is not None


def unusable_thread_id(thread_id: str) -> HTTPException:
    """The answer when a new thread cannot take `thread_id`.

    It is the same whether the id breaks the rule above or another user's thread
    already has it, so that creating a thread tells nobody whether someone else's
    thread exists (the caller's own existing thread is a plain 409 instead).
    """
    return HTTPException(
        422,
        f"thread_id {thread_id[: MAX_ID_LENGTH + 8]!r} cannot be used for a new thread: choose another "
        f"(1-{MAX_ID_LENGTH} letters, digits, '-' or '_'), or leave thread_id out to get a new one",
    )
