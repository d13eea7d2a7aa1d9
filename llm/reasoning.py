"""ChatOpenAI that keeps the reasoning OpenAI-compatible servers send (`reasoning_content`).

DeepSeek, Qwen, vLLM, SGLang and others put a reasoning model's thinking in a non-standard
`reasoning_content` field of each streamed delta (and of the final message). langchain-openai's
ChatOpenAI drops it; this subclass puts it into the message's `additional_kwargs`
(`reasoning_content`), where LangGraph clients and DeerFlow's web UI read it. Streamed chunks
concatenate, so the finished message holds the whole reasoning.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
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


class ChatOpenAIWithReasoning(ChatOpenAI):
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
