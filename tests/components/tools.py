"""Tools for tests, configured like any user tool (`tools: [{use: tests.components.tools:...}]`)."""

from __future__ import annotations

import os
from pathlib import Path

from langchain_core.tools import tool


@tool
def count_calls(note: str) -> str:
    """Record that the tool ran (one line per call in $ANTLER_TEST_CALLS_FILE) and say so."""
    path = os.environ.get("ANTLER_TEST_CALLS_FILE")
    if path:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(note + "\n")
    return f"counted: {note}"


@tool
def explode(reason: str) -> str:
    """Always fails, to show how tool errors reach the model."""
    raise RuntimeError(f"exploded: {reason}")
