"""The lead agent: `create_agent` with DeerFlow's middlewares, compiled once per set of run options.

DeerFlow's chain and where each link lives here:

 1. thread data, 2. uploads, 3. sandbox  -> the runner puts them into the run's
    input (`thread_data`, `sandbox`, new uploads in the user's message): state
    set once per run needs no graph node
 4. dangling tool calls                  -> DanglingToolCallMiddleware
 5. model errors                         -> LLMErrorHandlingMiddleware: the model's cluster budget and
                                            retries with backoff (llm.guard), `llm_retry` events
    terminal response, length and safety   -> FinishReasonMiddleware (empty answers asked again once;
    finish reasons                            cut or filtered answers said so)
 6. tool errors                          -> langchain's ToolErrorMiddleware
    tool output budget                   -> ToolOutputBudgetMiddleware (`tool_output`): long results
                                            cut, kept whole under outputs/tool-results
    read before write                    -> ReadBeforeWriteMiddleware: an existing file is changed only
                                            after a read_file of it newer than the last change
    person's budget                      -> PersonBudgetMiddleware (access.usage): outermost, so the
                                            summary's and the title's calls count too
 7. summarization                        -> ThreadSummarizer (agents.graph.summarize; `summarization`, on by
                                            default, from the model's context window; memory first)
 8. plan mode                            -> langchain's TodoListMiddleware (`is_plan_mode`)
 9. title                                -> TitleMiddleware (inside the model call)
10. memory                               -> the runner publishes MemoryUpdate when a run succeeds
11. view image                           -> ViewImageMiddleware + the view_image tool (vision models)
12. subagents and their limit            -> the task tool (`subagent_enabled`): at most
                                            `subagents.max_concurrent` calls of a turn run
13. loop detection                       -> LoopDetectionMiddleware
    guardrails (DeerFlow's GuardrailMiddleware) -> GuardrailMiddleware (`guardrails.enabled`)
    tool approvals                       -> ApprovalMiddleware (`approvals.enabled`): a LangGraph
                                            interrupt, answered by a resume run (agents.graph.approvals)
    steering                             -> SteeringMiddleware: messages a `steer` run handed over,
                                            added before the next model call
14. clarification                        -> `ask_clarification` is a return-direct tool: the run ends
                                            with the question as its last message
Every link acts inside the model or tool call, so a plain turn is two graph
nodes (model, then end) and few checkpoint writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    TodoListMiddleware,
    ToolErrorMiddleware,
)
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from agents.context import RunContext, RunOptions
from agents.graph.approvals import ApprovalMiddleware
from agents.graph.guardrails import GuardrailMiddleware, make_provider
from agents.graph.middleware import (
    DanglingToolCallMiddleware,
    FinishReasonMiddleware,
    LLMErrorHandlingMiddleware,
    LoopDetectionMiddleware,
    RunPromptMiddleware,
    TitleMiddleware,
    ToolTelemetryMiddleware,
    ViewImageMiddleware,
)
from agents.graph.middleware.person_budget import PersonBudgetMiddleware
from agents.graph.middleware.read_before_write import ReadBeforeWriteMiddleware
from agents.graph.middleware.steering import SteeringMiddleware
from agents.graph.middleware.tool_audit import ToolAuditMiddleware
from agents.graph.middleware.tool_output import ToolOutputBudgetMiddleware
from agents.graph.middleware.untrusted import UntrustedContentMiddleware
from agents.graph.patches import middleware_spans
from agents.graph.state import ThreadState
from agents.graph.summarize import MemoryFlush, ThreadSummarizer
from agents.tools import ask_clarification, config_tools, present_files
from agents.tools.thread_files import ThreadFiles
from agents.tools.tool_search import DeferredToolsMiddleware, make_tool_search
from config import AppConfig
from llm.guard import ModelCalls
from llm.models import create_chat_model
from llm.tracing_services import enabled_services

log = logging.getLogger(__name__)

MAX_COMPILED = 64  # compiled agents kept per process (options: model, modes, custom agent settings)


async def tool_error(exc: Exception, request: Any) -> str:
    name = request.tool_call.get("name", "tool") if hasattr(request, "tool_call") else "tool"
    return f"Error: {name} failed with {type(exc).__name__}: {exc}"


def build_middlewares(
    config: AppConfig,
    options: RunOptions,
    model: Any,
    deferred: list[BaseTool] | None = None,
    calls: ModelCalls | None = None,
    files: ThreadFiles | None = None,
) -> list[AgentMiddleware[Any, Any]]:
    """`calls`: the process's model calls (cluster budget through the bus); without them, calls are
    still tried again as `model_calls` says, with no budget."""
    chosen = config.get_model(options.model_name)
    budget = config.tool_output
    middlewares: list[AgentMiddleware[Any, Any]] = []
    calls = calls or ModelCalls(None, config)
    if calls.bus:  # outermost: the person's budget counts the summary's and the title's calls too
        middlewares.append(PersonBudgetMiddleware(calls.bus, config, chosen.name if chosen else None))
    if config.summarization.enabled:  # every link inside sees the shortened history
        flush = MemoryFlush(files.bus) if files is not None else None
        middlewares.append(ThreadSummarizer(config, model, options.model_name, flush, calls))
    middlewares += [
        # Outside RunPromptMiddleware: a call of a tool the run does not offer is a refusal it records.
        *([ToolAuditMiddleware(calls.bus, config)] if calls.bus else []),
        RunPromptMiddleware(),
        SteeringMiddleware(),  # messages sent while the run works, before its next model call
        *([ToolOutputBudgetMiddleware(budget, files)] if budget.enabled else []),
        *([ReadBeforeWriteMiddleware(files)] if files is not None else []),
        *([DeferredToolsMiddleware(deferred)] if deferred else []),
        DanglingToolCallMiddleware(),
        LLMErrorHandlingMiddleware(
            (chosen.display_name or chosen.name) if chosen else None,
            calls,
            chosen.name if chosen else None,
        ),
        ToolTelemetryMiddleware(),
        ToolErrorMiddleware(aon_error=tool_error),
    ]
    if options.is_plan_mode:
        middlewares.append(TodoListMiddleware())
    if config.title.enabled:
        title_model = create_chat_model(config, config.title.model_name) if config.title.model_name else None
        middlewares.append(TitleMiddleware(config.title, title_model))
    model_config = config.get_model(options.model_name)
    if model_config is not None and model_config.supports_vision:
        middlewares.append(ViewImageMiddleware())
    middlewares.append(FinishReasonMiddleware())
    middlewares.append(LoopDetectionMiddleware())
    if config.guardrails.enabled:
        middlewares.append(GuardrailMiddleware(make_provider(config.guardrails)))
    if config.approvals.enabled:  # innermost: a call the guardrails refuse is never asked about
        middlewares.append(ApprovalMiddleware(config.approvals))
    middlewares.append(UntrustedContentMiddleware())  # innermost: the model reads what it leaves
    return middlewares


def build_tools(
    config: AppConfig,
    options: RunOptions,
    extra: list[BaseTool] | None = None,
    task_tools: Sequence[BaseTool] = (),
) -> list[BaseTool]:
    """The lead's tools for these options; `task_tools` (`task` and the background tasks' tools)
    where subagents are on, and the background tasks' tools also where bash may run commands in the
    background."""
    tools = [ask_clarification, present_files, *config_tools(config), *(extra or [])]
    if options.subagent_enabled and config.subagents.enabled:
        tools += task_tools
    elif config.sandbox.max_background_commands > 0:  # bash's background commands are listed, cancelled
        tools += [t for t in task_tools if t.name != "task"]
    model = config.get_model(options.model_name)
    if model is None or not model.supports_vision:
        tools = [t for t in tools if t.name != "view_image"]  # only models that can see get it
    return tools


def build_lead_agent(
    config: AppConfig,
    options: RunOptions,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    extra_tools: list[BaseTool] | None = None,
    task_tools: Sequence[BaseTool] = (),
    deferred: list[BaseTool] | None = None,
    calls: ModelCalls | None = None,
    files: ThreadFiles | None = None,
) -> Any:
    """Compile the lead agent for one set of options.

    Raises:
        llm.errors.ModelConfigError, ProviderNotInstalled, ToolConfigError, config.MissingEnvError
    """
    model = create_chat_model(
        config,
        options.model_name,
        thinking_enabled=options.thinking_enabled,
        reasoning_effort=options.reasoning_effort,
        settings=dict(options.model_settings),
    )
    tools = build_tools(config, options, extra_tools, task_tools)
    if deferred:  # known to the tool node, bound for the model once found (agents.tools.tool_search)
        tools += [*deferred, make_tool_search(deferred, config.tool_search.max_results)]
    # Middleware hooks in LangSmith spans only when runs are traced there (agents.graph.patches).
    with middleware_spans("langsmith" in enabled_services(config)):
        return create_agent(
            model,
            tools,
            middleware=build_middlewares(config, options, model, deferred, calls, files),
            state_schema=ThreadState,
            context_schema=RunContext,
            checkpointer=checkpointer,
            name="lead_agent",
        )


class AgentCache:
    """Compiled agents by run options: compiling is milliseconds, a turn should not pay it."""

    def __init__(
        self,
        config: AppConfig,
        checkpointer: BaseCheckpointSaver[Any] | None,
        extra_tools: list[BaseTool] | None = None,
        task_tools: Sequence[BaseTool] = (),
        calls: ModelCalls | None = None,
        files: ThreadFiles | None = None,
    ) -> None:
        self.config = config
        self.calls = calls
        self.files = files  # the thread's files, for the tool output budget and read before write
        self.checkpointer = checkpointer
        self.extra_tools = extra_tools or []
        self.task_tools = task_tools
        self.deferred_tools: list[BaseTool] = []  # found with tool_search (tool_search.enabled)
        self._agents: dict[RunOptions, Any] = {}

    def get(self, options: RunOptions) -> Any:
        agent = self._agents.get(options)
        if agent is None:
            agent = build_lead_agent(
                self.config,
                options,
                self.checkpointer,
                self.extra_tools,
                self.task_tools,
                self.deferred_tools,
                self.calls,
                self.files,
            )
            self._agents[options] = agent  # only after success: a fixed config is retried next run
            log.info("compiled lead agent for %s", options)
            while len(self._agents) > MAX_COMPILED:  # the least recently used go first
                self._agents.pop(next(iter(self._agents)))
        else:
            self._agents[options] = self._agents.pop(options)
        return agent

    def clear(self) -> None:
        self._agents.clear()
