"""Cleaning and fencing untrusted text: moved to `bus.untrusted_text`, a shared library, since the
memory updater cleans what it stores with it too; these names stay importable from here."""

from bus.untrusted_text import (
    BLOCKED_TAGS,
    BOUNDARY_PROMPT,
    BOUNDARY_TAG,
    MAX_CHARS,
    clean,
    fence,
    is_fenced,
    label,
    neutralize,
    strip_invisible,
)

__all__ = [
    "BLOCKED_TAGS",
    "BOUNDARY_PROMPT",
    "BOUNDARY_TAG",
    "MAX_CHARS",
    "clean",
    "fence",
    "is_fenced",
    "label",
    "neutralize",
    "strip_invisible",
]
