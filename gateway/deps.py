"""What every route needs: the bus, the record stores, the caller's user id, and one error shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
from fastapi import Depends, HTTPException, Request

from access import AuditLog, RoleBook
from access.runner import RunAccess
from bus import Bus
from bus.messages import Reply, RunRecord, ThreadCreateReply, ThreadCreateRequest, ThreadRecord
from bus.metrics_feed import MetricsBoard
from bus.records import RecordStore, repair_by_key
from bus.runs import SubmissionOrder
from bus.service import call
from config import AppConfig
from gateway.accounts import AccountStore, LoginLockout, Sessions
from gateway.auth import UNAUTHORIZED, Auth, Caller
from gateway.ids import is_valid_id
from gateway.sso import OIDCClient, StateCookies
from gateway.thread_view import ThreadView

# A service's error codes as HTTP statuses (anything else is a 500).
_STATUS_OF_CODE = {
    "not_found": 404,
    "not_allowed": 403,
    "conflict": 409,
    "too_large": 413,
    "invalid": 422,
    "model_failed": 502,
    "unavailable": 503,
    "timeout": 504,
}


def http_error(code: str, message: str) -> HTTPException:
    """A service's refusal as the HTTP error a client of the gateway gets."""
    return HTTPException(_STATUS_OF_CODE.get(code, 500), message)


@dataclass
class Gateway:
    bus: Bus
    config: AppConfig
    auth: Auth
    threads: RecordStore[ThreadRecord]
    runs: RecordStore[RunRecord]
    view: ThreadView
    lockout: LoginLockout | None = None
    order: SubmissionOrder = field(default_factory=SubmissionOrder)  # a thread's runs start in order sent
    board: MetricsBoard | None = None  # every process's metrics, heard on the bus (GET /metrics)
    roles: RoleBook = field(default=None)  # type: ignore[assignment]  # people's roles, linked chat users
    audit: AuditLog = field(default=None)  # type: ignore[assignment]  # set as the gateway starts
    run_access: RunAccess = field(default=None)  # type: ignore[assignment]  # roles as the runner reads them
    sso: dict[str, OIDCClient] = field(default_factory=dict)  # identity providers by name
    sso_states: StateCookies = field(default=None)  # type: ignore[assignment]  # set as the gateway starts
    sso_http: httpx.AsyncClient | None = None

    @classmethod
    async def open(cls, bus: Bus, config: AppConfig) -> Gateway:
        s = bus.subjects
        settings = config.gateway.auth
        accounts = await AccountStore.open(bus)
        secret = settings.resolved("session_secret") or await accounts.session_secret()
        sessions = Sessions(secret, settings.session_days * 86_400)
        board = MetricsBoard(bus)
        await board.start()
        sso_http = httpx.AsyncClient(timeout=15, follow_redirects=False) if settings.oidc else None
        return cls(
            roles=await RoleBook.open(bus),
            audit=AuditLog(bus),
            run_access=RunAccess(bus, config),
            sso={p.name: OIDCClient(p, sso_http) for p in settings.oidc} if sso_http else {},
            sso_states=StateCookies(secret),
            sso_http=sso_http,
            board=board,
            bus=bus,
            config=config,
            auth=Auth(config.gateway, accounts, sessions),
            lockout=await LoginLockout.open(bus, settings.max_login_failures, settings.lockout_minutes * 60),
            # A thread record that fails validation is read as far as it can be (the runners write it back).
            threads=RecordStore(
                await bus.kv(s.threads_bucket), ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id")
            ),
            runs=RecordStore(await bus.kv(s.runs_bucket), RunRecord),
            view=ThreadView(bus.js, await bus.kv(s.threads_bucket)),
        )

    async def own_thread(self, thread_id: str, user_id: str) -> ThreadRecord:
        """The caller's thread, or 404 (also for other users' threads: their existence is not told)."""
        record = await self.threads.get(thread_id) if is_valid_id(thread_id) else None
        if record is None or record.user_id != user_id:
            raise HTTPException(404, f"thread {thread_id} not found")
        return record

    async def own_or_new_thread(self, thread_id: str, user_id: str) -> ThreadRecord:
        """The caller's thread, created for them when no thread has that id; 404 if another user's."""
        record = await self.threads.get(thread_id) if is_valid_id(thread_id) else None
        if record is None and is_valid_id(thread_id):
            created = await self.ask(
                "create", ThreadCreateRequest(thread_id=thread_id, user_id=user_id), ThreadCreateReply
            )
            record = created.thread
            if record is not None and record.user_id == user_id:
                self.view.put(record)
        if record is None or record.user_id != user_id:
            raise HTTPException(404, f"thread {thread_id} not found")
        return record

    async def own_run(self, thread_id: str | None, run_id: str, user_id: str) -> RunRecord:
        """The caller's run (of `thread_id`, when given), or 404."""
        record = await self.runs.get(run_id) if is_valid_id(run_id) else None
        if (
            record is None
            or record.user_id != user_id
            or (thread_id is not None and record.thread_id != thread_id)
        ):
            raise HTTPException(404, f"run {run_id} not found")
        return record

    async def ask(self, endpoint: str, message: Any, reply_model: type[Reply], timeout: float = 30) -> Any:
        """Request a runner's threads service; its errors become HTTP errors."""
        return await call(
            self.bus,
            "threads",
            endpoint,
            message,
            reply_model,
            timeout=timeout,
            errors=http_error,
            unavailable="no agent runner is running to answer thread requests",
        )


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]  # Starlette's app.state is untyped


def user(request: Request) -> str:
    """The caller, as `RequireToken` found them (checked again if a route is reached without it)."""
    found = getattr(request.state, "user_id", None)
    return found if isinstance(found, str) else gateway(request).auth.user_for(request.headers)


def caller(request: Request) -> Caller:
    """The caller as `RequireToken` found them (in single-user mode, the one user)."""
    found = getattr(request.state, "caller", None)
    if not isinstance(found, Caller):
        raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
    return found


GW = Annotated[Gateway, Depends(gateway)]
Me = Annotated[str, Depends(user)]
CallerOf = Annotated[Caller, Depends(caller)]
