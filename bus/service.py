"""Typed request/reply services on NATS micro, and the one way to call them.

Server side: a service is a list of endpoints, each a typed request, a typed
reply and an async handler. The helper decodes, runs each request in its own
task (a slow request never holds up the next), and always answers: a malformed
request, a refusal (`ServiceError` or one of the exception types the service
names as the caller's mistake) and a crash each come back as a reply whose
`error` says so — a caller never waits for a timeout because a handler failed.

    running = await start_service(bus, "sandbox", [Endpoint("exec", ExecRequest, ExecReply, broker.exec)],
                                  description="...")

Client side: `call` sends a typed request and returns the typed reply, or
raises `ServiceError` with the reply's code (`unavailable` when no service
listens, `timeout` when none answered in time). A component that wants its own
exception classes passes `errors`, a factory from (code, message).

    reply = await call(bus, "sandbox", "exec", request, ExecReply, timeout=30)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import Service
from pydantic import BaseModel

from bus import tracing
from bus.connection import Bus
from bus.errors import EnvelopeError, NoResponders, RequestTimeout
from bus.messages import ErrorInfo, Reply, decode, encode
from bus.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Q = TypeVar("Q", bound=BaseModel)
R = TypeVar("R", bound=Reply)

# Requests one service process works on at once; more wait in the NATS client's queue.
MAX_CONCURRENT = 64


class ServiceError(Exception):
    """A request a service refused or could not do; `code` says which kind.

    Codes callers act on: `not_found`, `not_allowed`, `invalid`, `conflict`,
    `too_large`, `timeout`, `unavailable`, `model_failed`, `internal`.
    """

    code = "internal"

    def __init__(self, message: str, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Endpoint(Generic[Q, R]):
    name: str
    request: type[Q]
    reply: type[R]
    handle: Callable[[Q], Awaitable[R]]


def _answer(
    endpoint: Endpoint[Any, Any], service: str, invalid: tuple[type[Exception], ...], client: str = ""
) -> Callable[[Request], Coroutine[Any, Any, None]]:
    async def answer(request: Request) -> None:
        try:
            with tracing.serving(request.headers, service, endpoint.name, client):
                reply = await endpoint.handle(decode(endpoint.request, request.data))
        except EnvelopeError as exc:
            reply = endpoint.reply(error=ErrorInfo(code="invalid", message=str(exc)))
        except ServiceError as exc:
            reply = endpoint.reply(error=ErrorInfo(code=exc.code, message=exc.message))
        except invalid as exc:  # the caller's mistake, in the words of the library that refused it
            reply = endpoint.reply(error=ErrorInfo(code="invalid", message=f"{type(exc).__name__}: {exc}"))
        except Exception as exc:
            log.exception("%s service: %s failed", service, endpoint.name)
            reply = endpoint.reply(error=ErrorInfo(code="internal", message=f"{type(exc).__name__}: {exc}"))
        await request.respond(encode(reply))

    return answer


class _Tasks:
    """Each request in its own task, at most `limit` at once: one endpoint is one subscription,
    whose callbacks otherwise run one after another (a model call or a command takes seconds)."""

    def __init__(self, service: str, limit: int) -> None:
        self.service = service
        self.slots = asyncio.Semaphore(limit)
        self.running: set[asyncio.Task[None]] = set()  # referenced until done

    def wrap(
        self, answer: Callable[[Request], Coroutine[Any, Any, None]]
    ) -> Callable[[Request], Awaitable[None]]:
        async def start(request: Request) -> None:
            await self.slots.acquire()  # a full service stops taking requests off its subscription
            task = asyncio.create_task(answer(request))
            self.running.add(task)
            task.add_done_callback(self._done)

        return start

    def _done(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        self.slots.release()
        if not task.cancelled() and task.exception() is not None:  # responding itself failed
            log.warning("%s service: a reply was not sent: %s", self.service, task.exception())

    async def cancel(self) -> None:
        await cancel_and_wait(*self.running)


STOP_SECONDS = 10.0


class Running:
    """A started service: `stop()` leaves the queue group and cancels requests still in work."""

    def __init__(self, service: Service, tasks: _Tasks) -> None:
        self.service = service
        self._tasks = tasks

    async def stop(self) -> None:
        try:
            # nats-py drains each endpoint's subscriptions with a round trip of up to 10 s each: on a
            # connection that stopped answering (seen under load), shutdown took minutes.
            async with asyncio.timeout(STOP_SECONDS):
                await self.service.stop()
        except TimeoutError:
            log.warning(
                "%s service: leaving its subscriptions took over %ss; stopping anyway",
                self._tasks.service,
                STOP_SECONDS,
            )
        await self._tasks.cancel()


async def start_service(
    bus: Bus,
    name: str,
    endpoints: Sequence[Endpoint[Any, Any]],
    *,
    description: str,
    metadata: dict[str, str] | None = None,
    invalid: tuple[type[Exception], ...] = (),
    version: str = "0.1.0",
    concurrency: int = MAX_CONCURRENT,
) -> Running:
    """Serve `endpoints` on `<prefix>.<name>.<endpoint>` in the queue group of service `name`.

    `invalid`: exception types a handler may raise that mean the request was
    wrong (answered with code `invalid` and the exception's text).
    """
    s = bus.subjects
    service = await add_service(
        bus.nc,
        name=s.service_name(name),
        version=version,
        description=description,
        queue_group=s.service_name(name),
        metadata=metadata,
    )
    tasks = _Tasks(name, concurrency)
    for endpoint in endpoints:
        await service.add_endpoint(
            name=endpoint.name,
            subject=s.service_subject(name, endpoint.name),
            handler=tasks.wrap(_answer(endpoint, name, invalid, bus.client_name)),
        )
    return Running(service, tasks)


async def call(
    bus: Bus,
    service: str,
    endpoint: str,
    request: BaseModel,
    reply: type[R],
    *,
    timeout: float,
    errors: Callable[[str, str], Exception] = lambda code, message: ServiceError(message, code),
    unavailable: str | None = None,
) -> R:
    """Send `request` to `<prefix>.<service>.<endpoint>`; the typed reply, or `errors(code, message)` raised.

    `unavailable`: what to tell the caller when no instance of the service runs
    (for example how to start it).
    """
    try:
        answer = await bus.request(
            bus.subjects.service_subject(service, endpoint), request, reply, timeout=timeout
        )
    except NoResponders:
        raise errors("unavailable", unavailable or f"no {service} service is running") from None
    except RequestTimeout:
        raise errors("timeout", f"the {service} service did not answer within {timeout:g}s") from None
    if answer.error is not None:
        raise errors(answer.error.code, answer.error.message)
    return answer
