"""Fair sharing of one broker between users: each user's commands get their own few slots.

A broker works on at most `bus.service.MAX_CONCURRENT` requests at once; when
they are all taken it stops taking requests off its subscription. Without a
per-user bound, one user's 70 slow commands took all of them and another user's
`echo` waited behind them (issue #27). So a user may have
`sandbox.max_commands_per_user` commands (and greps) running and
`sandbox.max_waiting_per_user` more waiting for one of those slots; beyond
that a command is refused at once with `Busy`, which frees the request's
broker slot immediately. Users together still share the broker's slots, but no
single user can hold more than running + waiting of them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sandbox.errors import Busy


class UserSlots:
    def __init__(self, running: int, waiting: int) -> None:
        self.running = running
        self.waiting = waiting
        self._admitted: dict[str, int] = {}  # user -> commands running or waiting
        self._slots: dict[str, asyncio.Semaphore] = {}

    def admitted(self, user_id: str) -> int:
        return self._admitted.get(user_id, 0)

    @contextlib.asynccontextmanager
    async def hold(self, user_id: str) -> AsyncIterator[None]:
        """A running slot of `user_id` for the block, waiting for one if need be.

        Raises:
            Busy: the user already has running + waiting commands at the broker.
        """
        if self.admitted(user_id) >= self.running + self.waiting:
            raise Busy(
                f"you already have {self.running} commands running and {self.waiting} waiting in the "
                "sandbox; wait for some to finish (or stop them) before starting more"
            )
        self._admitted[user_id] = self.admitted(user_id) + 1
        slots = self._slots.setdefault(user_id, asyncio.Semaphore(self.running))
        try:
            async with slots:
                yield
        finally:
            self._admitted[user_id] -= 1
            if self._admitted[user_id] == 0:
                del self._admitted[user_id]
                del self._slots[user_id]
