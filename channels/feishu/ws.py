"""lark-oapi's long connection (`lark_oapi.ws.Client`), tamed for a process that has its own loop.

That client is written for a process of its own: it takes an event loop when
imported, drives it with `run_until_complete`, calls handlers synchronously
and has no `stop()`. So it runs in a thread with a loop of its own; each event
is handed to the caller's loop (`on_event(payload)`), and the frame is
acknowledged only when that returns (raising makes Feishu deliver it again).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import lark_oapi as lark
import lark_oapi.ws.client as lark_ws

from bus.tasks import wait_for
from config import FeishuConfig

log = logging.getLogger("channels.feishu")


class _Events(lark.EventDispatcherHandler):  # type: ignore[misc]  # lark-oapi ships no type information
    """What lark-oapi's ws client calls for each event frame: hand the payload to our loop, wait."""

    def __init__(
        self, on_event: Callable[[bytes], Coroutine[Any, Any, None]], loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__()
        self._on_event = on_event
        self._loop = loop

    def _do_without_validation(self, payload: bytes) -> None:
        asyncio.run_coroutine_threadsafe(self._on_event(payload), self._loop).result(timeout=60)


class LongConnection:
    """lark-oapi's ws client on a thread of its own; `failed` is set if it gives up for good."""

    def __init__(
        self, config: FeishuConfig, domain: str, on_event: Callable[[bytes], Coroutine[Any, Any, None]]
    ) -> None:
        self._config = config
        self._domain = domain
        self._owner = asyncio.get_running_loop()
        self._events = _Events(on_event, self._owner)
        self.failed: asyncio.Future[BaseException] = self._owner.create_future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._thread = threading.Thread(target=self._main, name="feishu-ws", daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def connected(self) -> bool:
        """Whether the long connection is up now (the client reconnects by itself when it is not)."""
        return self._client is not None and getattr(self._client, "_conn", None) is not None

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        lark_ws.loop = loop  # the module-level loop its client runs on (see the module docstring)
        self._loop = loop
        try:
            self._client = lark.ws.Client(
                self._config.resolved("app_id"),
                self._config.resolved("app_secret"),
                event_handler=self._events,
                domain=self._domain,
                log_level=lark.LogLevel.WARNING,
            )
            self._client.start()
        except RuntimeError as exc:
            if "stopped" not in str(exc):  # loop.stop() from stop() ends start() this way
                self._report(exc)
        except BaseException as exc:  # bad credentials, or the server said never to reconnect
            self._report(exc)
        finally:
            self._shut(loop)

    def _shut(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the client's tasks (receive loop, pings, handlers), then close its socket and the loop."""
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        connection = getattr(self._client, "_conn", None)
        if connection is not None:
            try:
                loop.run_until_complete(wait_for(connection.close(), 5))
            except Exception as exc:
                log.debug("feishu: closing the long connection: %s", exc)
        loop.close()

    def _report(self, exc: BaseException) -> None:
        def settle() -> None:
            if not self.failed.done():
                self.failed.set_result(exc)

        self._owner.call_soon_threadsafe(settle)

    async def stop(self) -> None:
        loop, client = self._loop, self._client
        if loop is not None and client is not None:
            client._auto_reconnect = False  # it has no public stop(): stop its loop, `_main` cleans up
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass  # the loop closed meanwhile
        await asyncio.to_thread(self._thread.join, 10)
