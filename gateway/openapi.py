"""What the OpenAPI document can only say at run time: the models this deployment configures.

A request naming a model (`model` of a custom agent, `model_name` of suggestions) is refused
unless it is one of `models:` in config.yaml; the document lists them as an enum, so that a
client (and schemathesis) knows which values are valid before sending one.
"""

from __future__ import annotations

import copy
import threading
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


# FastAPI's document of our routes, made once per process: it takes more than a second of CPU, and
# every app `gateway.app.create_app` makes has the same routes (registered unconditionally; only the
# model names differ, added to a copy). Tests make many apps in one process.
_routes_document: dict[str, Any] = {}
_making = threading.Lock()  # made on a worker thread (gateway.allow) or at /openapi.json


def document_models(make: Callable[[], dict[str, Any]], names: list[str]) -> Callable[[], dict[str, Any]]:
    """An `app.openapi` that builds the document once, models included."""
    made: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        with _making:
            if not made:
                if not _routes_document:
                    _routes_document.update(make())
                made.update(with_model_names(copy.deepcopy(_routes_document), names))
        return made

    return openapi
