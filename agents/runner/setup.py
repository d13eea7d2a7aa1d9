"""A run made ready to stream: its compiled agent, its graph input (resumed from the checkpoint on a
later attempt), its context; `metadata` sent and, on a resumed run, the messages already finished.

A run that cannot start raises `CannotRun` (the runner sends `metadata` and ends it with the error):
a model or agent that cannot be built, a configuration gap, or a request that can never run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agents.context import RunContext, RunOptions
from agents.errors import AgentError, ModelConfigError
from agents.events import StreamTranslator, jsonable
from agents.follow_up import inherited
from agents.graph.lead import AgentCache
from agents.runner.active_run import ActiveRun
from agents.runner.graph_input import graph_config, graph_input_of
from agents.runner.journal import JournalRecorder
from config import AppConfig, ConfigError, MissingEnvError
from llm.tracing_services import with_tracing

log = logging.getLogger(__name__)


class CannotRun(Exception):
    def __init__(self, code: str, message: str) -> None:
        self.code, self.message = code, message
        super().__init__(f"{code}: {message}")


@dataclass
class Ready:
    """What a run needs to stream."""

    agent: Any
    options: RunOptions
    graph_config: dict[str, Any]
    graph_input: Any
    context: RunContext
    translator: StreamTranslator
    configurable: dict[str, Any]


async def ready_to_run(
    run: ActiveRun,
    setup: Any,
    agents: AgentCache,
    config: AppConfig,
    configurable: dict[str, Any],
    resumed: bool,
    tool_group_of: dict[str, str],
    first_start: bool = False,
    tool_server_of: dict[str, str] | None = None,
) -> Ready:
    """`setup`: the run's prompt and options (`PromptAssembly.prepare`); `first_start`: its record
    said no delivery had started it before this one.

    Raises:
        CannotRun: nothing has been sent yet for the run.
    """
    request = run.request
    options = setup.options
    try:
        agent = agents.get(options)
    except (MissingEnvError, ConfigError, AgentError, ModelConfigError) as exc:
        raise CannotRun(type(exc).__name__, str(exc)) from None
    try:
        graph = graph_config(request, configurable, config.runner.recursion_limit)
        graph_input, done_so_far = await graph_input_of(request, agent, resumed)
    except (TypeError, ValueError) as exc:  # a request that can never run: say so, do not retry
        raise CannotRun("InvalidRunRequest", f"the run request cannot run: {exc}") from None
    metadata: dict[str, Any] = {"run_id": run.run_id, "thread_id": run.thread_id, "attempt": run.attempt}
    if resumed:
        metadata["resumed"] = graph_input is None
    run.journal = JournalRecorder(request, run.attempt, graph_input is None, first_start)
    await run.events.emit("metadata", metadata)
    if resumed:
        log.info("run %s: attempt %d resumes from the last checkpoint", run.run_id, run.attempt)
    translator = StreamTranslator(request.stream_mode)
    if translator.wants_messages:
        # What the earlier attempt streamed may not all have been stored before it stopped:
        # the run's finished messages again, whole, so readers hold the complete text.
        for message in done_so_far:
            await run.events.emit("messages", [jsonable(message), {"resumed": True}])
    default = config.get_model()
    run.model = options.model_name or (default.name if default else None)
    await with_tracing(  # LangSmith, Langfuse: when switched on, the run's callbacks and whose it is
        graph,
        config,
        thread_id=request.thread_id,
        user_id=request.user_id,
        run_id=request.run_id,
        agent=request.assistant_id or "lead_agent",
        model=run.model,
    )
    context = RunContext(
        run_id=run.run_id,
        thread_id=run.thread_id,
        user_id=request.user_id,
        agent_name=options.agent_name,
        system_prompt=setup.system_prompt,
        model_name=run.model,
        is_bootstrap=setup.is_bootstrap,
        allowed_tools=setup.allowed_tools,
        tool_groups=setup.tool_groups,
        tool_group_of=tool_group_of,
        tool_server_of=tool_server_of or {},
        tool_filter=setup.tool_filter,
        role=setup.role,
        egress=setup.egress,
        origin=request.origin,
        steering=run.steering,
        report=inherited(request),  # how a background task it starts reports back
    )
    return Ready(agent, options, graph, graph_input, context, translator, configurable)
