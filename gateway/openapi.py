"""What the OpenAPI document can only say at run time: the models this deployment configures.

A request naming a model (`model` of a custom agent, `model_name` of suggestions) is refused
unless it is one of `models:` in config.yaml; the document lists them as an enum, so that a
client (and schemathesis) knows which values are valid before sending one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (component schema, property) naming a configured model.
MODEL_FIELDS = (("AgentSettings", "model"), ("AgentCreate", "model"), ("SuggestionRequest", "model_name"))


def with_model_names(spec: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """`spec` with every `MODEL_FIELDS` string restricted to `names` (null stays allowed)."""
    schemas = spec.get("components", {}).get("schemas", {})
    for component, field in MODEL_FIELDS:
        prop = schemas.get(component, {}).get("properties", {}).get(field)
        if prop is None:
            continue
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "string":
                branch["enum"] = list(names)
    return spec


def document_models(make: Callable[[], dict[str, Any]], names: list[str]) -> Callable[[], dict[str, Any]]:
    """An `app.openapi` that builds the document once, models included."""
    made: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not made:
            made.update(with_model_names(make(), names))
        return made

    return openapi
