"""The model factory: DeerFlow-style model entries become working chat models, or clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from agents.errors import ModelConfigError, ProviderNotInstalled
from config import AppConfig, MissingEnvError
from config.loader import _build
from llm.models import create_chat_model, model_kwargs


def config(*models: dict[str, Any]) -> AppConfig:
    return _build(AppConfig, {"models": list(models)}, "config.yaml")


def test_the_first_model_is_the_default_and_fields_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_FACTORY_KEY", "sk-env")
    cfg = config(
        {
            "name": "main",
            "model": "gpt-x",
            "api_key": "$TEST_FACTORY_KEY",
            "base_url": "http://127.0.0.1:9/v1",
            "max_tokens": 321,
            "timeout": 7,
        },
        {"name": "other", "model": "gpt-y", "api_key": "k"},
    )
    model = create_chat_model(cfg)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-x"
    assert model.openai_api_key.get_secret_value() == "sk-env"
    assert model.max_tokens == 321
    assert model.request_timeout == 7, "provider fields we do not know are passed through"
    assert create_chat_model(cfg, "other").model_name == "gpt-y"


def test_thinking_overrides_apply_only_when_asked_and_supported() -> None:
    entry = {
        "name": "qwen",
        "model": "qwen3",
        "api_key": "k",
        "supports_thinking": True,
        "extra_body": {"top_k": 20},
        "when_thinking_enabled": {"extra_body": {"chat_template_kwargs": {"enable_thinking": True}}},
    }
    model = config(entry).models[0]
    assert model_kwargs(model, thinking_enabled=False)["extra_body"] == {"top_k": 20}
    assert model_kwargs(model, thinking_enabled=True)["extra_body"] == {
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    plain = config({**entry, "supports_thinking": False}).models[0]
    assert "chat_template_kwargs" not in model_kwargs(plain, thinking_enabled=True)["extra_body"]


def test_a_missing_provider_package_names_what_to_install() -> None:
    cfg = config({"name": "claude", "use": "langchain_anthropicx:ChatAnthropic", "api_key": "k"})
    with pytest.raises(ProviderNotInstalled, match="pip install langchain-anthropicx"):
        create_chat_model(cfg)


def test_unknown_and_missing_models_are_explained() -> None:
    with pytest.raises(ModelConfigError, match="no models configured"):
        create_chat_model(config())
    with pytest.raises(ModelConfigError, match="configured models: a"):
        create_chat_model(config({"name": "a", "api_key": "k"}), "b")


def test_a_missing_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_FACTORY_MISSING", raising=False)
    cfg = config({"name": "m", "api_key": "$TEST_FACTORY_MISSING"})
    with pytest.raises(MissingEnvError, match="TEST_FACTORY_MISSING"):
        create_chat_model(cfg)
