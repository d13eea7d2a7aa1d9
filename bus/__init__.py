"""The bus: NATS/JetStream connection, embedded server, subjects, envelopes, consumers.

async with await connect_and_provision(url, cfg.bus) as bus:
    await bus.publish(bus.subjects.runs_submit, RunRequest(...), msg_id=run_id)
    await run_consumers(Consumer(bus, stream=..., durable=..., filter_subjects=[...],
                                 model=RunRequest, handler=handle))
"""

from bus import _lazy_imports  # noqa: F401  (before nats: see its docstring)
from bus.connection import MSG_ID, Bus
from bus.consumer import Abandon, AfterEarlier, Consumer, ConsumerStats, Defer, Delivery, Reject, Retry
from bus.dlq import DeadLetter, dead_letter, get_dead_letter, list_dead_letters, replay
from bus.errors import (
    BusConnectError,
    BusError,
    DataDirLocked,
    EnvelopeError,
    Misconfigured,
    NoResponders,
    NotStored,
    RequestError,
    RequestTimeout,
    ServerBinaryNotFound,
    ServerError,
    ServerStartError,
    Unreachable,
)
from bus.health import component_degraded, component_healthy, component_unhealthy
from bus.messages import ENVELOPES, Envelope, decode, encode
from bus.provision import Provisioned, connect_and_provision, provision, stream_configs
from bus.runtime import (
    ComponentEntry,
    ComponentFailed,
    component_ready,
    run_consumers,
    serve,
    stop_on_signals,
)
from bus.server import EmbeddedServer, find_nats_server
from bus.subjects import Subjects, safe_token

__all__ = [
    "ENVELOPES",
    "MSG_ID",
    "Abandon",
    "AfterEarlier",
    "Bus",
    "BusConnectError",
    "BusError",
    "ComponentEntry",
    "ComponentFailed",
    "Consumer",
    "ConsumerStats",
    "DataDirLocked",
    "DeadLetter",
    "Defer",
    "Delivery",
    "EmbeddedServer",
    "Envelope",
    "EnvelopeError",
    "Misconfigured",
    "NoResponders",
    "NotStored",
    "Provisioned",
    "Reject",
    "RequestError",
    "RequestTimeout",
    "Retry",
    "ServerBinaryNotFound",
    "ServerError",
    "ServerStartError",
    "Subjects",
    "Unreachable",
    "component_degraded",
    "component_healthy",
    "component_ready",
    "component_unhealthy",
    "connect_and_provision",
    "dead_letter",
    "decode",
    "encode",
    "find_nats_server",
    "get_dead_letter",
    "list_dead_letters",
    "provision",
    "replay",
    "run_consumers",
    "safe_token",
    "serve",
    "stop_on_signals",
    "stream_configs",
]
