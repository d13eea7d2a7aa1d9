"""What config.yaml names as `module:attribute` (`tools[].use`, `guardrails.use`), imported.

Modules of this package that config files name have moved; the old paths keep working, so a
config.yaml written for an earlier layout still starts (`MOVED`, longest prefix first).
"""

from __future__ import annotations

import importlib
from typing import Any

# Old module path -> where it lives now.
MOVED: dict[str, str] = {
    "agents.community": "agents.tools.community",
    "agents.guardrails": "agents.graph.guardrails",
}


def current_module(name: str) -> str:
    """The module's path today (an old path from `MOVED` rewritten, any other unchanged)."""
    for old, new in sorted(MOVED.items(), key=lambda item: -len(item[0])):
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def load(use: str) -> Any:
    """The attribute `use` names (`module:attribute`).

    Raises:
        ImportError: the module cannot be imported.
        AttributeError: the module has no such attribute.
    """
    module_name, _, attr = use.partition(":")
    return getattr(importlib.import_module(current_module(module_name)), attr)
