"""A handler's unexpected exception answered as a 500 on a connection that stays open.

Starlette's `ServerErrorMiddleware` sends its 500 and then raises the exception again (so that the
server can log it); uvicorn, seeing an exception after a response started, closes the connection.
A client sending its next request on that keep-alive connection then fails as well. This middleware
sits inside `ServerErrorMiddleware`: it logs the exception and answers 500 itself, so the server
sees a request that ended normally and keeps the connection. An exception after the response
started (a stream broken midway) still goes up: that connection cannot carry another answer.
"""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class AnswerCrashes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            log.exception("gateway: %s %s failed", scope.get("method"), scope.get("path"))
            answer = JSONResponse({"detail": f"internal error ({type(exc).__name__})"}, status_code=500)
            await answer(scope, receive, send)
