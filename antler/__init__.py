"""The `antler` command line: up, run <component>, send, tail, schema, dlq."""

from antler.cli import main
from antler.components import COMPONENTS, ComponentSpec, resolve_component

__all__ = ["COMPONENTS", "ComponentSpec", "main", "resolve_component"]
