"""Turns per key: handlers of messages with the same key (a chat, a run) run one at a time, in the
order their messages arrived, while other keys go on. A key is forgotten when no handler holds or
waits for its turn, so a consumer that sees millions of keys keeps only the busy ones.

Across an outage, arrival order is not the key's order: the messages in flight when NATS went away
are given up (another delivery may own them now) and come again only after the server's ack wait,
while a later message of the same key, published meanwhile, is new and comes at once. So the
sequences given up are held (`hold`): a later message of their key waits (`wait_for_earlier`) until
they have come again (`arrived`), or until the hold lapses (they went to another process).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class KeyTurn:
    """One key's turn: its lock (first come, first served) and how many handlers hold or want it."""

    name: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass
class _Hold:
    """A key's messages given up in an outage that have not come again, and the later ones waiting."""

    missing: set[int]  # stream sequences given up, not back yet
    until: float  # loop time after which they are no longer waited for
    waiting: set[int] = field(default_factory=set)  # later sequences waiting for them
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def ahead_of(self, seq: int) -> bool:
        return any(s < seq for s in self.missing) or any(s < seq for s in self.waiting)

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class KeyTurns:
    def __init__(self) -> None:
        self._keys: dict[str, KeyTurn] = {}
        self._holds: dict[str, _Hold] = {}

    def enter(self, name: str) -> KeyTurn:
        """Count a handler in for `name`'s turn (it then acquires `lock`, and later `leave`s)."""
        turn = self._keys.get(name)
        if turn is None:
            turn = self._keys[name] = KeyTurn(name)
        turn.users += 1
        return turn

    def leave(self, turn: KeyTurn, has_turn: bool) -> None:
        """The handler is done: give the turn on (if it had it) and forget an idle key."""
        if has_turn:
            turn.lock.release()
        turn.users -= 1
        if turn.users == 0:
            self._keys.pop(turn.name, None)

    def __len__(self) -> int:
        return len(self._keys)

    def hold(self, name: str, seq: int, seconds: float) -> None:
        """Message `seq` of `name` was given up: later messages of `name` wait for it to come again,
        for at most `seconds`."""
        until = asyncio.get_running_loop().time() + seconds
        hold = self._holds.get(name)
        if hold is None:
            self._holds[name] = _Hold({seq}, until)
        else:
            hold.missing.add(seq)
            hold.until = max(hold.until, until)

    def must_wait(self, name: str, seq: int) -> bool:
        """Whether message `seq` of `name` comes after one given up (or waiting for those)."""
        hold = self._holds.get(name)
        return hold is not None and hold.ahead_of(seq)

    async def wait_for_earlier(self, name: str, seq: int, stop: asyncio.Event) -> bool:
        """Until the messages of `name` before `seq` that were given up (or wait for those) have come
        again and entered their turn; False if `stop` was set first. Call `enter` right after."""
        hold = self._holds.get(name)
        if hold is None:
            return True
        loop = asyncio.get_running_loop()
        hold.waiting.add(seq)
        try:
            while hold.ahead_of(seq) and not stop.is_set():
                left = hold.until - loop.time()
                if left <= 0 and hold.missing:
                    gone = sorted(hold.missing)
                    log.warning("key %s: messages %s did not come again; going on without them", name, gone)
                    hold.missing.clear()
                    hold.wake()
                    continue
                changed = hold.changed
                waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(stop.wait())]
                try:
                    timeout = left if hold.missing else None
                    await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
            return not stop.is_set()
        finally:
            hold.waiting.discard(seq)
            hold.wake()
            self._forget_hold(name, hold)

    def arrived(self, name: str, seq: int) -> None:
        """Message `seq` of `name` has entered its turn: the ones held back behind it may follow."""
        hold = self._holds.get(name)
        if hold is not None and seq in hold.missing:
            hold.missing.discard(seq)
            hold.wake()
            self._forget_hold(name, hold)

    def _forget_hold(self, name: str, hold: _Hold) -> None:
        if not hold.missing and not hold.waiting and self._holds.get(name) is hold:
            del self._holds[name]
