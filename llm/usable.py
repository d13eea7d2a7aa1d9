"""Whether the agent has a model it can use, and, when it has not, what to tell the person who
started Antler.

The runner checks at start (`model_problem(config, build=True)`) and reports itself degraded with the
reason, so `/health` and `antler top` say it; `antler up` prints `advice` as its last lines. Only
what can be known without calling the model is checked: a model is configured, the `$ENV` values
of the default one are set, its provider is installed (and, with `build`, the provider accepts its
fields). An endpoint that does not answer shows on the first call, as a run error.

`build=False` imports no LangChain: `antler up` stays light.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from config import AppConfig, ConfigError

EXAMPLE = "models:\n  - {name: gpt-4o, model: gpt-4o, api_key: $OPENAI_API_KEY, base_url: https://api.openai.com/v1}"
FIRST_TURN = 'README.md, "A first turn"'


@dataclass(frozen=True)
class ModelProblem:
    """Why the default model cannot be used: `reason` in one line (health), `advice` for a terminal."""

    reason: str
    advice: str


def model_problem(config: AppConfig, *, build: bool = False) -> ModelProblem | None:
    """What keeps the default model from being used, or None when nothing is known to."""
    where = config.source or str(Path.cwd() / "config.yaml")  # where `antler up` would read it
    model = config.get_model()
    if model is None:
        return ModelProblem(
            reason=f"no model configured: add a `models:` entry to {where} ({FIRST_TURN})",
            advice=(
                f"Antler cannot answer yet: no model is configured. Add these two lines to {where},\n"
                f"with your model, key and endpoint (any OpenAI-compatible server; {FIRST_TURN}),\n"
                "then start antler up again:\n\n" + _indented(EXAMPLE)
            ),
        )
    try:
        for name in (*type(model).model_fields, *(model.__pydantic_extra__ or {})):
            model.resolved(name)
    except ConfigError as exc:
        return _unusable(model.name, str(exc))
    module = model.use.partition(":")[0]
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return _unusable(model.name, f"its provider module {module!r} is not installed (models[].use)")
    if build:
        from llm.errors import ModelConfigError
        from llm.models import create_chat_model

        try:
            create_chat_model(config)
        except (ModelConfigError, ConfigError) as exc:
            return _unusable(model.name, str(exc))
        except Exception as exc:  # the provider class refused its fields (an OpenAI client with no key)
            return _unusable(model.name, f"{type(exc).__name__}: {exc}")
    return None


def _unusable(name: str, why: str) -> ModelProblem:
    return ModelProblem(
        reason=f"the model {name!r} cannot be used: {why}",
        advice=f"Antler cannot answer yet: the model {name!r} cannot be used:\n  {why}\n"
        f"Fix that, then start antler up again ({FIRST_TURN}).",
    )


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
