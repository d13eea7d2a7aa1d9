"""The HTTP gateway: the LangGraph-compatible runtime API (and, as it lands, DeerFlow's REST API).

antler run gateway        # or: python -m gateway
"""

from gateway.app import create_app
from gateway.deps import Gateway
from gateway.server import run

__all__ = ["Gateway", "create_app", "run"]
