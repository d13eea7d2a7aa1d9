"""Libraries loaded only when first used, to keep every component process small.

nats-py imports `aiohttp` when it is imported, for its websocket transport,
which only `ws://` server URLs use; loading it costs each process about 11 MB.
Here `import aiohttp` first finds a stand-in module: the real library is
imported the first time anything reads an attribute of it (a websocket
connection, or another library that uses aiohttp), and then replaces the
stand-in in `sys.modules`, so nothing changes for whoever does need it.
(`importlib.util.LazyLoader` does not help: the `import` statement itself
reads the module's `__spec__`, which loads it.) Imported by `bus/__init__.py`
before nats.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

DEFERRED = ("aiohttp",)


class _StandIn(types.ModuleType):
    """Imports the real module on the first attribute read, and forwards every read to it."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def defer(name: str) -> None:
    """Put a stand-in for `name` in `sys.modules`, unless it is imported already or not installed."""
    if name not in sys.modules and importlib.util.find_spec(name) is not None:
        sys.modules[name] = _StandIn(name)


for _name in DEFERRED:
    defer(_name)
