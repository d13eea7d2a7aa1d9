"""`Client`: the same methods as `AsyncClient`, blocking, for scripts and notebooks.

The async client runs on an event loop of the client's own, in a private thread; each method
waits for its result there. So it works where a loop already runs in the caller's thread (Jupyter),
and `stream()` is a plain generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from antler.client._async import AsyncClient
from antler.client._events import StreamEvent
from antler.client.errors import ClientError

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread until `stop()`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="antler-client", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise ClientError("a Client's method was called from inside its own loop; use AsyncClient there")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class Client:
    """Antler from Python code, blocking: DeerFlowClient's methods, over the bus.

    `Client()` talks to the `antler up` running here; `Client.embedded(config=...)` starts one of its
    own, stopped by `close()` (or leaving `with`). Takes the arguments of `AsyncClient`.
    Every method of `AsyncClient` is here with the same arguments and returns; `stream()` yields
    `StreamEvent`s as a plain generator.
    """

    def __init__(self, config: Any = None, **kwargs: Any) -> None:
        self._loop = _LoopThread()
        try:
            self._async = self._loop.run(_make(AsyncClient, config, kwargs))
        except BaseException:
            self._loop.stop()
            raise

    @classmethod
    def embedded(cls, config: Any = None, **kwargs: Any) -> Client:
        """A client with an Antler of its own for as long as it is open (see `AsyncClient.embedded`);
        Antler is started here, so a failure to start is raised by this call."""
        client = cls.__new__(cls)
        client._loop = _LoopThread()
        try:
            client._async = client._loop.run(_make(AsyncClient.embedded, config, kwargs))
            client._loop.run(client._async.connect())
        except BaseException:
            if hasattr(client, "_async"):
                with contextlib.suppress(Exception):
                    client._loop.run(client._async.close())
            client._loop.stop()
            raise
        return client

    @property
    def async_client(self) -> AsyncClient:
        return self._async

    def __getattr__(self, name: str) -> Any:
        # Only what is not defined here: every public method of AsyncClient, made blocking.
        if name.startswith("_"):
            raise AttributeError(name)
        target = getattr(self._async, name)
        if not inspect.iscoroutinefunction(target):
            return target
        blocking = functools.wraps(target)(lambda *args, **kwargs: self._loop.run(target(*args, **kwargs)))
        return blocking

    def stream(self, message: str, thread_id: str | None = None, **kwargs: Any) -> Iterator[StreamEvent]:
        """One turn's events, as they come (see `AsyncClient.stream`)."""
        events = self._async.stream(message, thread_id, **kwargs)
        try:
            while True:
                try:
                    event = self._loop.run(events.__anext__())
                except StopAsyncIteration:
                    return
                yield event
        finally:
            self._loop.run(events.aclose())

    def chat(self, message: str, thread_id: str | None = None, **kwargs: Any) -> str:
        """One turn; the agent's final answer as text."""
        return self._loop.run(self._async.chat(message, thread_id, **kwargs))

    def reset_agent(self) -> None:
        self._async.reset_agent()

    def close(self) -> None:
        """Close the connection (and stop an embedded Antler), then the client's loop. Idempotent."""
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self._async.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> Client:
        self._loop.run(self._async.connect())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(AsyncClient) if not n.startswith("_")})


async def _make(factory: Any, config: Any, kwargs: dict[str, Any]) -> AsyncClient:
    return factory(config, **kwargs)  # type: ignore[no-any-return]  # the AsyncClient class it was given
