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

httpx's package imports its command line client (`httpx._main`: click, rich and pygments, about
5 MB in every process that uses httpx) for the one name `httpx.main`. Its stand-in holds `main`
as a function that loads the real module when called; nothing else of it is read on import.
The LangGraph SDK's client (`langgraph_sdk.client`, with httpx's websockets and SOCKS support) is
imported by LangGraph for the SDK's `get_client` and `get_sync_client`, which Antler never calls:
the same kind of stand-in.

Some packages' `__init__` imports every module they have, where what is imported is one of them:
`langsmith.types` (164 generated API models) for one `Literal`, `openai.types` for the chat types
(its `__init__` brings the Responses API's 250 modules). Those import as stand-in packages that
hold the real `__path__`: a submodule imports as usual (`from openai.types.chat import ...`, and
`from openai.types import chat`), and the first read of any other name (`openai.types.Completion`)
imports the real package in place of the stand-in.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

DEFERRED = ("aiohttp",)
# Modules imported only for these functions (`from module import name` reads them at once).
# Packages whose `__init__` imports every module of theirs, where a submodule or two is what is used.
DEFERRED_PACKAGES = ("langsmith.types", "openai.types")
DEFERRED_FUNCTIONS = {
    "httpx._main": ("main",),
    "langgraph_sdk.client": ("get_client", "get_sync_client"),
}


class _StandIn(types.ModuleType):
    """Imports the real module on the first attribute read, and forwards every read to it."""

    def __getattr__(self, attr: str) -> Any:
        standing_in = sys.modules.get(self.__name__) is self
        if standing_in and "__path__" in self.__dict__ and not attr.startswith("__"):
            # A package's: `from package import submodule` imports just that submodule.
            try:
                return importlib.import_module(f"{self.__name__}.{attr}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{self.__name__}.{attr}":
                    raise
        return getattr(_load(self.__name__), attr)


class _ModuleStandIn(_StandIn):
    """A stand-in for a module that is no package: `from module import name` asks for `__path__`
    first, which must not load it."""

    def __getattr__(self, attr: str) -> Any:
        if attr == "__path__":
            raise AttributeError(attr)
        return super().__getattr__(attr)


def _load(name: str) -> types.ModuleType:
    """The real module, imported in place of its stand-in."""
    _packages.release(name)
    stand_in = sys.modules.get(name)
    if not isinstance(stand_in, _StandIn):  # imported already: a reader still holding the stand-in
        return importlib.import_module(name)
    del sys.modules[name]
    module = importlib.import_module(name)
    if "__path__" in stand_in.__dict__:
        # Submodules imported through a package's stand-in are the real package's attributes too.
        for child_name, child in list(sys.modules.items()):
            parent, _, child_attr = child_name.rpartition(".")
            if parent == name and child_attr not in module.__dict__:
                setattr(module, child_attr, child)
    return module


def defer(name: str) -> None:
    """Put a stand-in for `name` in `sys.modules`, unless it is imported already or not installed."""
    if name not in sys.modules and importlib.util.find_spec(name) is not None:
        sys.modules[name] = _StandIn(name)


def defer_functions(name: str, functions: tuple[str, ...]) -> None:
    """Put a stand-in for `name` in `sys.modules` whose `functions` load the real module when called,
    unless it or its package is imported already, or the package is not installed."""
    package = name.rpartition(".")[0]
    if name in sys.modules or package in sys.modules or importlib.util.find_spec(package) is None:
        return
    stand_in = _ModuleStandIn(name)
    for function in functions:

        def call(*args: Any, _function: str = function, **kwargs: Any) -> Any:
            return getattr(_load(name), _function)(*args, **kwargs)

        setattr(stand_in, function, call)
    sys.modules[name] = stand_in


class _PackageStandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the packages named in `waiting` as stand-ins that hold their `__path__`: their
    submodules import as usual, and the first read of any other name imports the real package (its
    `__init__`), in place of the stand-in."""

    def __init__(self) -> None:
        self.waiting: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in self.waiting:
            return None
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None or not real.submodule_search_locations:
            return None
        spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
        spec.submodule_search_locations = list(real.submodule_search_locations)
        return spec

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        stand_in = _StandIn(spec.name)
        stand_in.__path__ = list(spec.submodule_search_locations or ())  # read on import, must not load
        return stand_in

    def exec_module(self, module: types.ModuleType) -> None:
        pass

    def release(self, name: str) -> None:
        """From now on `name` imports for real."""
        self.waiting.discard(name)


_packages = _PackageStandIns()


def defer_package(name: str) -> None:
    """Import the package `name` as a stand-in (see `_PackageStandIns`), unless it is imported already."""
    if name not in sys.modules:
        _packages.waiting.add(name)
        if _packages not in sys.meta_path:
            sys.meta_path.insert(0, _packages)


for _name in DEFERRED:
    defer(_name)
for _name in DEFERRED_PACKAGES:
    defer_package(_name)
for _name, _functions in DEFERRED_FUNCTIONS.items():
    defer_functions(_name, _functions)
