"""The sandbox: a broker service running commands and file operations per user and thread.

antler run sandbox        # or: python -m sandbox
SandboxClient(bus, user_id, thread_id)   # what tools call (the agent's are in agents.tools.sandbox)
"""

from sandbox.broker import Broker, run, serve_broker
from sandbox.client import SandboxClient
from sandbox.errors import (
    Busy,
    Conflict,
    InvalidRequest,
    NotAllowed,
    NotFound,
    SandboxError,
    Timeout,
    TooLarge,
    Unavailable,
)
from sandbox.host import bwrap_works
from sandbox.paths import ThreadFS
from sandbox.providers import BwrapProvider, LocalProvider, Provider, make_provider

__all__ = [
    "Broker",
    "Busy",
    "BwrapProvider",
    "Conflict",
    "InvalidRequest",
    "LocalProvider",
    "NotAllowed",
    "NotFound",
    "Provider",
    "SandboxClient",
    "SandboxError",
    "ThreadFS",
    "Timeout",
    "TooLarge",
    "Unavailable",
    "bwrap_works",
    "make_provider",
    "run",
    "serve_broker",
]
