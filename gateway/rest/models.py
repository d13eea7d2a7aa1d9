"""Models: `/api/models` (what a client may pick, without secrets: the models the caller's role
allows, so the web UI's picker offers no model a run would be refused)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel

from gateway.answers import model_info
from gateway.deps import GW, Me
from gateway.schemas import errors

router = APIRouter()


class ModelInfo(BaseModel):
    name: str
    display_name: str | None = None
    description: str | None = None
    model: str | None = None
    supports_thinking: bool = False
    supports_reasoning_effort: bool = False
    supports_vision: bool = False


class ModelsList(BaseModel):
    models: list[ModelInfo]


def _model_info(gw: GW, name: str) -> ModelInfo:
    info = model_info(gw.config, name)
    if info is None:
        raise HTTPException(404, f"no model named {name}")
    return ModelInfo(**info)


@router.get("/models", response_model=ModelsList)
async def list_models(gw: GW, me: Me) -> ModelsList:
    permissions = await gw.run_access.permissions(me)
    return ModelsList(models=[_model_info(gw, m.name) for m in gw.config.models if permissions.model(m.name)])


@router.get("/models/{name}", response_model=ModelInfo, responses=errors(404))
async def get_model(gw: GW, me: Me, name: str) -> ModelInfo:
    return _model_info(gw, name)
