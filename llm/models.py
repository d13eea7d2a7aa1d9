"""Model factory: chat models from config.yaml `models[]`, as DeerFlow writes them."""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any

import orjson
from langchain_core.language_models import BaseChatModel

from config import AppConfig, ModelConfig
from llm.errors import ModelConfigError, ProviderNotInstalled

# Fields of ours that are not provider arguments.
_OWN_FIELDS = {
    "name",
    "display_name",
    "description",
    "use",
    "supports_thinking",
    "supports_reasoning_effort",
    "supports_vision",
    "when_thinking_enabled",
    "when_thinking_disabled",
    "thinking",
    "max_concurrent_calls",
    "requests_per_minute",
    "tokens_per_minute",
}
_PASS_THROUGH = (
    "model",
    "api_key",
    "base_url",
    "max_tokens",
    "temperature",
    "use_responses_api",
    "output_version",
)

# Where to get a provider module that is not installed.
_PACKAGES = {
    "langchain_openai": "langchain-openai",
    "langchain_anthropic": "langchain-anthropic",
    "langchain_deepseek": "langchain-deepseek",
    "langchain_google_genai": "langchain-google-genai",
    "langchain_ollama": "langchain-ollama",
    "langchain_mistralai": "langchain-mistralai",
    "langchain_aws": "langchain-aws",
}


def resolve_class(use: str) -> type[Any]:
    """Import `module:Class`.

    Raises:
        ProviderNotInstalled: the module is missing (the message says what to pip install).
        ModelConfigError: the module has no such class.
    """
    module_name, _, attr = use.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = (exc.name or module_name).split(".")[0]
        raise ProviderNotInstalled(use, module_name, _PACKAGES.get(top, top.replace("_", "-"))) from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise ModelConfigError(f"{module_name} has no {attr!r} (models[].use = {use!r})")
    return cls  # type: ignore[no-any-return]  # whatever class the config names


def model_kwargs(
    model: ModelConfig,
    thinking_enabled: bool,
    reasoning_effort: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Provider keyword arguments, `$ENV` values resolved (MissingEnvError names the variable).

    `settings` (a custom agent's `model_settings`: temperature, max_tokens) override the model's
    own; `reasoning_effort` reaches models that support it; thinking on or off merges the model's
    `when_thinking_enabled` / `when_thinking_disabled` fields.
    """
    kwargs: dict[str, Any] = {}
    for name in _PASS_THROUGH:
        value = model.resolved(name)
        if value is not None:
            kwargs[name] = value
    kwargs.update(model.resolved_extra())
    for name, value in (settings or {}).items():
        if name in ("temperature", "max_tokens", "top_p") and value is not None:
            kwargs[name] = value
    if reasoning_effort and model.supports_reasoning_effort:
        kwargs["reasoning_effort"] = reasoning_effort
    if thinking_enabled and model.supports_thinking:
        overrides = dict(model.resolved("when_thinking_enabled") or {})
        thinking = model.resolved("thinking")
        if thinking is not None:
            overrides.setdefault("thinking", thinking)
        kwargs = _deep_merge(kwargs, overrides)
    elif not thinking_enabled and model.supports_thinking:
        kwargs = _deep_merge(kwargs, dict(model.resolved("when_thinking_disabled") or {}))
    return kwargs


def create_chat_model(
    config: AppConfig,
    name: str | None = None,
    *,
    thinking_enabled: bool = False,
    reasoning_effort: str | None = None,
    settings: dict[str, Any] | None = None,
) -> BaseChatModel:
    """Instantiate the model called `name` (default: the first configured).

    Raises:
        ModelConfigError, ProviderNotInstalled, config.MissingEnvError
    """
    model = config.get_model(name)
    if model is None:
        if not config.models:
            raise ModelConfigError("no models configured: add one under `models:` in config.yaml")
        known = ", ".join(m.name for m in config.models)
        raise ModelConfigError(f"unknown model {name!r}; configured models: {known}")
    cls = resolve_class(model.use)
    if model.use == "langchain_openai:ChatOpenAI":
        from llm.reasoning import ChatOpenAIWithReasoning

        cls = ChatOpenAIWithReasoning  # the same client, keeping `reasoning_content`
    kwargs = model_kwargs(model, thinking_enabled, reasoning_effort, settings)
    if "max_retries" in getattr(cls, "model_fields", {}):
        # Our own retries (llm.retry) wait as the provider asks, report each try and give the model's
        # slot back while they wait; a provider client's own would retry silently inside each of ours.
        kwargs.setdefault("max_retries", 0)
    if model.use.startswith("langchain_openai:"):
        kwargs.setdefault("stream_usage", True)
        if not {"http_async_client", "openai_proxy", "http_socket_options"} & kwargs.keys():
            from llm.http import shared_client, shared_sync_client

            base_url = kwargs.get("base_url") or kwargs.get("openai_api_base")
            client = shared_client(base_url)
            if client is not None:
                kwargs["http_async_client"] = client
            if "http_client" not in kwargs:
                kwargs["http_client"] = shared_sync_client(base_url)
    try:
        chat_model = cls(**kwargs)
    except Exception as exc:
        raise ModelConfigError(f"cannot create model {model.name!r} ({model.use}): {exc}") from exc
    _lean_openai_requests(chat_model)
    return chat_model  # type: ignore[no-any-return]  # an instance of the class the config names


class _LeanCompletions:
    """`chat.completions` for langchain-openai, without per-request work the SDK does for nothing here.

    openai's `create()` walks each request through its TypedDict transformer (about a sixth of a turn's
    CPU in the benchmark) and builds a pydantic object for every streamed chunk, which langchain-openai
    turns straight back into a dict. The requests langchain-openai builds are plain JSON already, so
    they are posted as they are and streamed chunks stay dicts; everything else (raw responses, other
    endpoints) is the SDK's own.
    """

    def __init__(self, completions: Any, encode_body: bool = False) -> None:
        from openai._base_client import make_request_options
        from openai.types.chat import ChatCompletion

        from llm.streaming import CoalescingStream

        self._completions = completions
        self._options = make_request_options
        self._stream_cls = CoalescingStream[object]
        self._cast_to = ChatCompletion
        self._encode_body = encode_body

    async def create(
        self,
        *,
        extra_headers: Any = None,
        extra_query: Any = None,
        extra_body: Any = None,
        timeout: Any = None,
        **params: Any,
    ) -> Any:
        options = self._options(
            extra_headers=extra_headers,
            extra_query=extra_query,
            extra_body=extra_body,
            **({"timeout": timeout} if timeout is not None else {}),
            security={"bearer_auth": True},
        )
        # The body as JSON bytes, made by orjson: the SDK's own encoder (the stdlib's, with a Python
        # hook per object) was a fortieth of a chat turn's CPU. `extra_body` is merged by the SDK.
        body = _json_body(params) if self._encode_body and extra_body is None else params
        encoded = isinstance(body, bytes)
        return await self._completions._post(
            "/chat/completions",
            body=None if encoded else body,
            content=body if encoded else None,
            options=options,
            cast_to=self._cast_to,
            stream=bool(params.get("stream")),
            stream_cls=self._stream_cls,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)


def _lean_openai_requests(chat_model: Any) -> None:
    """Swap in `_LeanCompletions` where langchain-openai's Chat Completions client is in use."""
    completions = getattr(chat_model, "async_client", None)
    if type(completions).__name__ != "AsyncCompletions" or getattr(chat_model, "use_responses_api", False):
        return
    root = getattr(chat_model, "root_async_client", None)
    try:
        from openai import AsyncOpenAI

        # Only the plain client sends the body as it gets it (Azure's reads the model from it).
        chat_model.async_client = _LeanCompletions(completions, encode_body=type(root) is AsyncOpenAI)
    except Exception:  # an SDK without these internals: keep its own path
        return
    prepare_url = getattr(root, "_prepare_url", None)
    if root is not None and callable(prepare_url):
        # The endpoint's URL, joined to the base URL and parsed once (httpx's URL parsing is slow),
        # not on every request; URLs are immutable.
        root._prepare_url = functools.lru_cache(maxsize=16)(prepare_url)


def _json_body(params: dict[str, Any]) -> bytes | dict[str, Any]:
    """`params` as the SDK would post them (UTF-8, no spaces), or as they are when orjson would not
    encode them alike: a value it cannot take, or a top-level number that is not finite (the SDK
    refuses NaN and infinities; orjson would send null)."""
    for value in params.values():
        if isinstance(value, float) and not math.isfinite(value):
            return params
    try:
        return orjson.dumps(params, default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return params


def _json_default(value: Any) -> Any:
    """What the SDK's encoder also turns into JSON: pydantic models (as it dumps them)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True, mode="json", by_alias=True)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
