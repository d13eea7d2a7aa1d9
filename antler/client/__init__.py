"""Antler from Python code: `Client` (blocking) and `AsyncClient`, with DeerFlowClient's methods.

    from antler import Client

    with Client() as client:                       # the `antler up` running here
        print(client.chat("hello"))
        for event in client.stream("and now?", thread_id=client.last_thread_id):
            ...

They talk to Antler over the bus with the gateway's NATS user and rights (no HTTP), or start an
Antler of their own (`Client.embedded(config=...)`). docs/client.md has the whole story.
"""

from antler.client._async import AsyncClient
from antler.client._events import StreamEvent
from antler.client._sync import Client
from antler.client.errors import (
    AntlerNotRunning,
    ClientError,
    InvalidRequest,
    NotAllowed,
    NotFound,
    RunFailed,
    Unavailable,
)

__all__ = [
    "AntlerNotRunning",
    "AsyncClient",
    "Client",
    "ClientError",
    "InvalidRequest",
    "NotAllowed",
    "NotFound",
    "RunFailed",
    "StreamEvent",
    "Unavailable",
]
