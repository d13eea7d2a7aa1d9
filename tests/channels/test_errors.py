"""channels/ raises its errors from one tree (`channels.errors`), so code that handles every platform
alike names only the bases, and the tree drawn in its docstring is the whole of it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import channels
from channels import errors


def _exceptions_defined_in_channels() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(channels.__path__, "channels."):
        if info.name.endswith("__main__"):
            continue  # runs the router when imported
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_every_exception_of_the_package_is_in_its_tree() -> None:
    found = _exceptions_defined_in_channels()
    assert errors.RateLimited in found
    assert [e.__qualname__ for e in found if not issubclass(e, errors.ChannelError)] == []


def test_the_tree_drawn_in_the_docstring_names_every_exception() -> None:
    doc = errors.__doc__ or ""
    assert [e.__qualname__ for e in _exceptions_defined_in_channels() if e.__qualname__ not in doc] == []
