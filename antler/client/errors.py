"""What the client raises: one tree, each error also the builtin a caller would catch.

    ClientError
    ├── AntlerNotRunning (ConnectionError)   no Antler to talk to, or it refused the login
    ├── NotAllowed (PermissionError)         this NATS user (or Antler user) may not do that
    ├── NotFound (LookupError)               no such thread, upload, artifact, skill, model
    ├── InvalidRequest (ValueError)          bad arguments: the message names them
    ├── Unavailable                          the component that does it is not running
    └── RunFailed                            the agent's run ended with an error

Each carries what a program needs to act on it as attributes (`subject`, `run_id`, `code`).
"""

from __future__ import annotations


class ClientError(Exception):
    """Anything the client could not do; `str()` says what and what to do about it."""


class AntlerNotRunning(ClientError, ConnectionError):
    """No NATS of Antler's at the URL found or given, or it refused this login."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class NotAllowed(ClientError, PermissionError):
    """The bus refused this user `subject` (its rights do not cover it), or Antler refused the call."""

    def __init__(self, message: str, subject: str | None = None) -> None:
        super().__init__(message)
        self.subject = subject


class NotFound(ClientError, LookupError):
    """What was named does not exist (or belongs to another user)."""


class InvalidRequest(ClientError, ValueError):
    """An argument Antler cannot take; the message names it."""


class Unavailable(ClientError):
    """The component that answers this is not running (or did not answer in time)."""


class RunFailed(ClientError):
    """The run ended with an error (`code`, the message) or timed out."""

    def __init__(self, message: str, *, run_id: str, thread_id: str, code: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.thread_id = thread_id
        self.code = code
