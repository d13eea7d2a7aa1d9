"""Gateway settings for tests."""

from __future__ import annotations

from typing import Any

from config import AppConfig
from config.loader import _build


def with_gateway(config: AppConfig, **changes: Any) -> AppConfig:
    data = config.model_dump(mode="json")
    data["gateway"] = {**data["gateway"], **changes}
    return _build(AppConfig, data, "test config")
