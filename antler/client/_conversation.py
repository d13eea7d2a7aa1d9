"""Conversation: `stream()` a turn as DeerFlow's StreamEvents, `chat()` for its final text.

A turn is what the gateway makes of `POST /threads/{id}/runs/stream`: the thread is created for the
user when new, a runner checks the run (`threads.check_run`), the run is recorded pending and
submitted on `runs.submit` (`bus.runs.submit_run`), and its events are read from the run's log.
Files attached to a message are uploaded into the thread first and named in the message, as the
web UI sends them (`additional_kwargs.files`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from antler.client._base import Connected, check_thread_id
from antler.client._events import STREAM_MODES, USAGE_KEYS, StreamEvent, Translator, goal_outcome
from antler.client.errors import InvalidRequest, NotFound, RunFailed, Unavailable
from bus.messages import Reply, RunRequest
from bus.runs import SubmissionOrder, cancel_run, follow_run, submit_run

# What a turn may set (DeerFlow's run options); anything else is refused, by name.
RUN_OPTIONS = frozenset(
    {"model_name", "thinking_enabled", "subagent_enabled", "plan_mode", "agent_name", "reasoning_effort"}
)
CHECK_RUN_SECONDS = 10.0  # as the gateway: without a runner's answer in time, the run goes ahead


class Conversation(Connected):
    """`stream()` and `chat()`; the run options set on the client apply to every turn."""

    def __init__(
        self,
        config: Any = None,
        *,
        model_name: str | None = None,
        thinking_enabled: bool = False,
        subagent_enabled: bool = False,
        plan_mode: bool = False,
        agent_name: str | None = None,
        run_timeout: float | None = None,
        **where: Any,
    ) -> None:
        super().__init__(config, **where)
        self.options: dict[str, Any] = {
            "model_name": model_name,
            "thinking_enabled": thinking_enabled,
            "subagent_enabled": subagent_enabled,
            "plan_mode": plan_mode,
            "agent_name": agent_name,
        }
        self._check_options(self.options)
        self.run_timeout = run_timeout
        self._order = SubmissionOrder()
        self.last_run_id: str | None = None  # the latest turn's run and thread
        self.last_thread_id: str | None = None

    def reset_agent(self) -> None:
        """DeerFlow's client rebuilds its cached agent here; Antler's runners read every change
        (skills, MCP servers, memory) before each run, so there is nothing to reset."""

    def _check_options(self, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - RUN_OPTIONS)
        if unknown:
            raise InvalidRequest(
                f"unknown run option(s) {', '.join(unknown)}; a turn takes {', '.join(sorted(RUN_OPTIONS))}"
            )
        model = options.get("model_name")
        if model is not None and self.config.get_model(model) is None:
            names = ", ".join(m.name for m in self.config.models) or "none configured"
            raise InvalidRequest(f"model_name {model!r} is not a configured model ({names})")

    async def stream(
        self,
        message: str,
        thread_id: str | None = None,
        *,
        files: Sequence[str | os.PathLike[str]] | None = None,
        follow_goal: bool = True,
        **options: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One turn, as it happens: `values`, `messages-tuple`, `custom` events, then `end`.

        Args:
            message: what the user says.
            thread_id: the conversation to continue; None starts a new one (its id is in
                `last_thread_id` and in the run's events).
            files: local files sent with the message (uploaded into the thread first).
            follow_goal: while the thread has a goal (`set_goal`), Antler goes on by itself in
                further runs until the goal is done; the stream goes on through them, as DeerFlow
                streams a goal's continuations in one run, with one `end` (usage of them all,
                `goal`: how it ended). False: this run's events only (its `end` names the next run
                in `goal.next_run_id`).
            options: run options for this turn (model_name, thinking_enabled, subagent_enabled,
                plan_mode, agent_name, reasoning_effort), over the client's.

        Raises:
            RunFailed: the run ended with an error.
            InvalidRequest: an argument Antler cannot take (named).
        """
        if not isinstance(message, str) or not message.strip():
            raise InvalidRequest("message: the text to send, not empty")
        self._check_options(options)
        thread_id = thread_id or str(uuid.uuid4())
        check_thread_id(thread_id)
        await self._own_or_new_thread(thread_id)
        content, kwargs = message, {}
        if files:
            uploaded = (await self.upload_files(thread_id, files))["files"]  # type: ignore[attr-defined]  # a mixin: AsyncClient has it
            kwargs["files"] = [
                {"filename": f["filename"], "size": f["size"], "path": f["virtual_path"]} for f in uploaded
            ]
            listing = "\n".join(f"- {f['virtual_path']}" for f in uploaded)
            content = f"{message}\n\n[Files sent with this message, now in the sandbox:\n{listing}]"
        request = self._request(thread_id, content, kwargs, {**self.options, **options})
        await self._check_run(request)
        await self._guarded("submit the run", lambda bus: submit_run(bus, self._order.stamp(request)))
        self.last_run_id, self.last_thread_id = request.run_id, thread_id
        translator = Translator()
        bus = await self.connect()
        current: str | None = request.run_id
        usage = dict.fromkeys(USAGE_KEYS, 0)
        ended = False
        try:
            while current is not None:
                run_id, current = current, None
                self.last_run_id = run_id
                async with contextlib.aclosing(
                    follow_run(bus, run_id, timeout=self.run_timeout, live=True)
                ) as events:
                    async for event in events:
                        for item in translator.take(event):
                            if item.type != "end":
                                yield item
                                continue
                            if translator.status in ("error", "timeout"):
                                ended = True
                                raise self._failure(translator, run_id, thread_id)
                            for key in USAGE_KEYS:
                                usage[key] += translator.usage[key]
                            goal = goal_outcome(event.data)
                            if follow_goal and goal is not None and goal.get("next_run_id"):
                                current = str(goal["next_run_id"])  # the goal goes on in that run
                                continue
                            data: dict[str, Any] = {"usage": dict(usage)}
                            if goal is not None:
                                data["goal"] = goal
                            yield StreamEvent("end", data)
            ended = True
        except TimeoutError:
            raise Unavailable(
                f"run {self.last_run_id} sent nothing for {self.run_timeout:g}s: is a runner running?"
            ) from None
        finally:
            if not ended and self.last_run_id is not None:
                # the caller stopped reading: the run stops too, as a closed stream's would
                await cancel_run(bus, self.last_run_id, reason="the client stopped reading")

    async def chat(
        self,
        message: str,
        thread_id: str | None = None,
        *,
        files: Sequence[str | os.PathLike[str]] | None = None,
        follow_goal: bool = True,
        **options: Any,
    ) -> str:
        """One turn; the text of the agent's last answer (deltas concatenated per message id; with a
        goal on the thread, the last answer of the run that ended it, see `stream`)."""
        translator_text = ""
        buffers: dict[str, str] = {}
        last_id: str | None = None
        async for event in self.stream(message, thread_id, files=files, follow_goal=follow_goal, **options):
            if (
                event.type == "messages-tuple"
                and event.data.get("type") == "ai"
                and event.data.get("content")
            ):
                last_id = event.data.get("id") or ""
                buffers[last_id] = buffers.get(last_id, "") + event.data["content"]
        if last_id is not None:
            translator_text = buffers[last_id]
        return translator_text

    def _request(
        self, thread_id: str, content: str, kwargs: dict[str, Any], options: dict[str, Any]
    ) -> RunRequest:
        configurable = {
            "thread_id": thread_id,
            "thinking_enabled": bool(options.get("thinking_enabled")),
            "is_plan_mode": bool(options.get("plan_mode")),
            "subagent_enabled": bool(options.get("subagent_enabled")),
        }
        for name in ("model_name", "agent_name", "reasoning_effort"):
            if options.get(name):
                configurable[name] = options[name]
        human: dict[str, Any] = {"role": "user", "content": content}
        if kwargs:
            human["additional_kwargs"] = kwargs
        return RunRequest(
            thread_id=thread_id,
            user_id=self.user_id,
            input={"messages": [human]},
            config={"configurable": configurable},
            stream_mode=list(STREAM_MODES),
            metadata={"source": "antler.Client"},
        )

    async def _check_run(self, request: RunRequest) -> None:
        """A runner's check, as the gateway asks it: refused runs fail here, naming the field."""
        try:
            await self._ask("threads", "check_run", request, Reply, timeout=CHECK_RUN_SECONDS)
        except (InvalidRequest, NotFound):
            raise
        except Unavailable as exc:
            if "no agent runner" in str(exc):
                raise Unavailable(f"nothing can answer: {exc}") from None
            # no answer in time: the runner that takes the run checks it again

    def _failure(self, translator: Translator, run_id: str, thread_id: str) -> RunFailed:
        error = translator.error or {}
        message = str(error.get("message") or f"the run ended: {translator.status}")
        return RunFailed(
            f"run {run_id} failed: {message}",
            run_id=run_id,
            thread_id=thread_id,
            code=str(error.get("error") or translator.status),
        )
