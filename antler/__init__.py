"""The `antler` command line (up, run <component>, send, tail, schema, dlq), and the Python client
(`antler.Client`, `antler.AsyncClient`: antler/client, imported on first use)."""

from typing import TYPE_CHECKING, Any

from antler.cli import main
from antler.components import COMPONENTS, ComponentSpec, resolve_component

if TYPE_CHECKING:
    from antler.client import AsyncClient, Client, StreamEvent

__all__ = ["COMPONENTS", "AsyncClient", "Client", "ComponentSpec", "StreamEvent", "main", "resolve_component"]

_CLIENT = frozenset({"AsyncClient", "Client", "StreamEvent"})


def __getattr__(name: str) -> Any:
    if name in _CLIENT:
        import antler.client

        return getattr(antler.client, name)
    raise AttributeError(f"module 'antler' has no attribute {name!r}")
