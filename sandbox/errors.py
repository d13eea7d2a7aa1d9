"""Errors of the sandbox, each with the `code` its reply carries.

SandboxError (code)
├── NotFound        not_found    no such file or directory
├── NotAllowed      not_allowed  outside the thread's paths, read-only, or a refused command
├── InvalidRequest  invalid      a malformed or impossible request
├── Timeout         timeout      the command ran past its time limit (also TimeoutError)
├── TooLarge        too_large    over a size cap
├── Conflict        conflict     str_replace found the text zero or several times
├── Busy            busy         the user has as many commands running and waiting as they may
└── Unavailable     unavailable  no broker answered (client side)
"""

from __future__ import annotations

from bus.service import ServiceError


class SandboxError(ServiceError):
    """The broker answers a raised one with its code and message; the client raises it again."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class NotFound(SandboxError):
    code = "not_found"


class NotAllowed(SandboxError):
    code = "not_allowed"


class InvalidRequest(SandboxError):
    code = "invalid"


class Timeout(SandboxError, TimeoutError):
    code = "timeout"


class TooLarge(SandboxError):
    code = "too_large"


class Conflict(SandboxError):
    code = "conflict"


class Busy(SandboxError):
    code = "busy"


class Unavailable(SandboxError):
    code = "unavailable"


BY_CODE: dict[str, type[SandboxError]] = {
    cls.code: cls
    for cls in (NotFound, NotAllowed, InvalidRequest, Timeout, TooLarge, Conflict, Busy, Unavailable)
}


def from_code(code: str, message: str) -> SandboxError:
    """The error a reply's code names (the client side of `bus.service.call`)."""
    error = BY_CODE.get(code, SandboxError)(message)
    error.code = code
    return error
