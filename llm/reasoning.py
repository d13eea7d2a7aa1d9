"""ChatOpenAI that keeps the reasoning OpenAI-compatible servers send (`reasoning_content`),
and formats each bound tool once.

DeepSeek, Qwen, vLLM, SGLang and others put a reasoning model's thinking in a non-standard
`reasoning_content` field of each streamed delta (and of the final message). langchain-openai's
ChatOpenAI drops it; this subclass puts it into the message's `additional_kwargs`
(`reasoning_content`), where LangGraph clients and DeerFlow's web UI read it. Streamed chunks
concatenate, so the finished message holds the whole reasoning.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI

REASONING_KEYS = ("reasoning_content", "reasoning")


def _reasoning_of(part: Any) -> str | None:
    if not isinstance(part, dict):
        part = getattr(part, "model_extra", None) or getattr(part, "__dict__", {})
    for key in REASONING_KEYS:
        value = part.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# Tools in OpenAI's format by (tool, strict): create_agent binds the tools again for every model
# call, and converting a tool (its JSON schema built, then dereferenced) was a tenth of a chat turn.
_FORMATTED: dict[tuple[int, bool | None], tuple[weakref.ref[BaseTool], dict[str, Any]]] = {}
_FORMATTED_MAX = 2048


def _formatted_tool(tool: Any, strict: bool | None) -> Any:
    if not isinstance(tool, BaseTool):
        return tool  # dicts and functions: langchain-openai converts them as before
    key = (id(tool), strict)
    known = _FORMATTED.get(key)
    if known is not None and known[0]() is tool:
        return known[1]
    formatted = convert_to_openai_tool(tool, strict=strict)
    extras = getattr(tool, "extras", None)
    if isinstance(extras, dict):  # what langchain-openai passes on from a tool's extras
        from langchain_openai.chat_models.base import _TOOL_EXTRAS_PASSTHROUGH

        for name in _TOOL_EXTRAS_PASSTHROUGH:
            if name in extras:
                formatted[name] = extras[name]
    if len(_FORMATTED) >= _FORMATTED_MAX:  # tools that are gone make room
        for stale in [k for k, (ref, _) in _FORMATTED.items() if ref() is None]:
            del _FORMATTED[stale]
        if len(_FORMATTED) >= _FORMATTED_MAX:
            _FORMATTED.clear()
    _FORMATTED[key] = (weakref.ref(tool), formatted)
    return formatted


class ChatOpenAIWithReasoning(ChatOpenAI):
    def bind_tools(self, tools: Sequence[Any], *, strict: bool | None = None, **kwargs: Any) -> Any:
        """langchain-openai's, with each tool's OpenAI form made once, not on every model call."""
        if kwargs.get("response_format") and strict is not False and not self.use_responses_api:
            strict = True  # as langchain-openai decides it: Chat Completions wants strict tools then
        return super().bind_tools([_formatted_tool(t, strict) for t in tools], strict=strict, **kwargs)

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict[str, Any], default_chunk_class: type, base_generation_info: dict[str, Any] | None
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        choices = chunk.get("choices") or []
        if generation is not None and choices and isinstance(generation.message, AIMessageChunk):
            reasoning = _reasoning_of((choices[0] or {}).get("delta") or {})
            if reasoning:
                generation.message.additional_kwargs["reasoning_content"] = reasoning
        return generation

    def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = response if isinstance(response, dict) else response.model_dump()
        for generation, choice in zip(result.generations, raw.get("choices") or [], strict=False):
            reasoning = _reasoning_of((choice or {}).get("message") or {})
            if reasoning and isinstance(generation.message, AIMessage):
                generation.message.additional_kwargs["reasoning_content"] = reasoning
        return result
