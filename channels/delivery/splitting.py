"""Long answers in pieces that each fit one platform message.

Every adapter cuts the same way: at a paragraph end if one is far enough
along, else at a line end, else between words, and only as a last resort in
the middle of a word. A cut inside a fenced code block closes the fence at the
end of the piece and opens it again (with its language) at the start of the
next, so both pieces still render as code.

Platforms count differently (Telegram in UTF-16 units, Slack after mrkdwn
escaping, Feishu and DingTalk in bytes): `measure` says how a platform counts,
and a piece that is still too long by that count is cut again, smaller.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_MIN_LIMIT = 64


def split_text(
    text: str, limit: int, *, measure: Callable[[str], int] = len, max_size: int | None = None
) -> list[str]:
    """`text` in pieces of at most `limit` characters and `max_size` by `measure` (default `limit`).

    Always at least one piece (an empty text is one empty piece).
    """
    if limit < _MIN_LIMIT:
        raise ValueError(f"a message limit of {limit} characters is too small to split into")
    budget = limit if max_size is None else max_size
    pieces: list[str] = []
    for piece in _split(text, limit):
        size = measure(piece)
        if size <= budget or limit <= _MIN_LIMIT:
            pieces.append(piece)
            continue
        smaller = max(_MIN_LIMIT, min(limit - 1, int(limit * budget / size * 0.95)))
        pieces.extend(split_text(piece, smaller, measure=measure, max_size=budget))
    return pieces


def _split(text: str, limit: int) -> list[str]:
    pieces: list[str] = []
    reopen = ""  # the fence line a previous cut left open, repeated at the start of this piece
    rest = text
    while True:
        room = limit - len(reopen)
        if len(rest) <= room:
            pieces.append(reopen + rest)
            return pieces
        # Keep room for a closing fence (a newline and the longest fence marker in the text).
        cut, skip = _cut(rest, max(16, room - 1 - _longest_fence(text)))
        before, _, last = rest[:cut].rpartition("\n")
        if before.strip() and open_fence(reopen + rest[:cut]) == last.strip():
            cut, skip = len(before), 1  # not right after a fence line: that would leave an empty block
        head = reopen + rest[:cut]
        fence = open_fence(head)
        if fence is not None:
            marker = _FENCE.match(fence)
            head = head.rstrip("\n") + "\n" + (marker.group(1) if marker else "```")
            reopen = (fence if len(fence) <= limit // 4 else fence.strip()[:3]) + "\n"
        else:
            reopen = ""
        pieces.append(head)
        rest = rest[cut + skip :]


def _cut(text: str, room: int) -> tuple[int, int]:
    """Where to cut `text` so the head fits `room`: (head length, separator characters to drop)."""
    paragraph = text.rfind("\n\n", 0, room + 1)
    if paragraph > room // 2:
        return paragraph, 2
    line = text.rfind("\n", 0, room + 1)
    if line > room // 4:
        return line, 1
    space = text.rfind(" ", 0, room + 1)
    if space > room // 2:
        return space, 1
    if line > 0:
        return line, 1
    return room, 0


def _longest_fence(text: str) -> int:
    return max((len(m.group(0)) for m in re.finditer(r"`{3,}|~{3,}", text)), default=3)


def open_fence(text: str) -> str | None:
    """The opening line of the fenced code block still open at the end of `text`, if any."""
    opened: str | None = None
    marker = ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if match is None:
            continue
        fence, info = match.group(1), match.group(2).strip()
        if opened is None:
            if not (fence[0] == "`" and "`" in info):
                opened, marker = line.strip(), fence
        elif fence[0] == marker[0] and len(fence) >= len(marker) and not info:
            opened = None
    return opened
