"""Turns per key: handlers of messages with the same key (a chat, a run) run one at a time, in the
order their messages arrived, while other keys go on. A key is forgotten when no handler holds or
waits for its turn, so a consumer that sees millions of keys keeps only the busy ones."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class KeyTurn:
    """One key's turn: its lock (first come, first served) and how many handlers hold or want it."""

    name: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class KeyTurns:
    def __init__(self) -> None:
        self._keys: dict[str, KeyTurn] = {}

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
