"""Thread and run ids at the gateway: the bus's one rule (`bus.messages.is_valid_id`), and how the
gateway answers ids that break it.

Ids become KV keys, subject tokens and object-store path segments; NATS refuses
keys like `..`, `a b` or `*` (the gateway used to answer those with a 500). The
bus defines which ids are usable for everyone (runners refuse run requests with
others); the gateway checks them before any of that happens:

- a path naming an id outside the rule is answered like any id that does not
  exist (404): no such thread or run can exist;
- creating a thread with such an id is a 422 (`unusable_thread_id`).
"""

from __future__ import annotations

from fastapi import HTTPException

from bus.messages import ID_PATTERN, ID_RULE, is_valid_id

__all__ = ["ID_PATTERN", "is_valid_id", "unusable_thread_id"]


def unusable_thread_id(thread_id: str) -> HTTPException:
    """The answer when a new thread cannot take `thread_id`.

    It is the same whether the id breaks the rule or another user's thread
    already has it, so that creating a thread tells nobody whether someone
    else's thread exists (the caller's own existing thread is a plain 409).
    """
    return HTTPException(
        422,
        f"thread_id {thread_id[:136]!r} cannot be used for a new thread: choose another ({ID_RULE}), "
        "or leave thread_id out to get a new one",
    )
