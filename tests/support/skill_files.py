"""Hostile SKILL.md contents for the loader and the installer."""

from __future__ import annotations

# Nine levels of nine aliases: a few hundred bytes naming 9**9 strings once flattened.
ALIAS_BOMB = (
    '---\nname: bomb\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{level}: &{level} [{','.join(f'*{below}' for _ in range(9))}]\n"
        for below, level in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "description: *i\n---\nBoom.\n"
)
