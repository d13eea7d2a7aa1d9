"""Helpers shared by our middlewares: reading and rebuilding model responses, a tool call's types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from langchain.agents.middleware import ExtendedModelResponse, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command

# What a tool call comes to, and the next step an `awrap_tool_call` hands a call on to.
ToolResult: TypeAlias = ToolMessage | Command[Any]
ToolHandler: TypeAlias = Callable[[ToolCallRequest], Awaitable[ToolResult]]


def as_response(result: Any) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    return result  # type: ignore[no-any-return]  # the handler's response, already one of the two


def messages_of(result: Any) -> list[BaseMessage]:
    response = as_response(result)
    inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
    return list(inner.result)


def last_ai(result: Any) -> AIMessage | None:
    for message in reversed(messages_of(result)):
        if isinstance(message, AIMessage):
            return message
    return None


def replace_ai(result: Any, new: AIMessage) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """The same response with its last AIMessage replaced by `new`."""
    response = as_response(result)
    inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
    messages = list(inner.result)
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            messages[i] = new
            break
    rebuilt = ModelResponse(result=messages, structured_response=inner.structured_response)
    if isinstance(response, ExtendedModelResponse):
        return ExtendedModelResponse(model_response=rebuilt, command=response.command)
    return rebuilt


def with_update(result: Any, update: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """Attach a state update to a model response (no extra graph node needed)."""
    response = as_response(result)
    if isinstance(response, ExtendedModelResponse):
        earlier = dict(response.command.update or {}) if response.command and response.command.update else {}
        return ExtendedModelResponse(
            model_response=response.model_response, command=Command(update={**earlier, **update})
        )
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


def without_tool_calls(message: AIMessage, content: str | None = None) -> AIMessage:
    """An AIMessage with no structured or raw provider tool calls left."""
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in ("tool_calls", "function_call")}
    return AIMessage(
        content=message.content if content is None else content,
        id=message.id,
        additional_kwargs=extra,
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
        tool_calls=[],
        invalid_tool_calls=[],
    )
