"""The HTTP gateway: the LangGraph-compatible runtime API and DeerFlow's REST API.

antler run gateway        # or: python -m gateway

The app is imported on first use, so `antler user` (which needs only `gateway.accounts`) does not
load FastAPI and the routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.app import create_app
    from gateway.deps import Gateway
    from gateway.server import run

__all__ = ["Gateway", "create_app", "run"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from gateway.app import create_app

        return create_app
    if name == "Gateway":
        from gateway.deps import Gateway

        return Gateway
    if name == "run":
        from gateway.server import run

        return run
    raise AttributeError(f"module 'gateway' has no attribute {name!r}")
