"""Antler's `/api/commands`: the chat commands and how they are used, as `/help` lists them in a
chat (`skills.commands`), so the web UI offers the same ones (the skills are `/api/skills`)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from gateway.deps import Me
from skills.commands import CHAT_COMMANDS, HELP_INTRO, USAGE

router = APIRouter()


class Command(BaseModel):
    name: str
    about: str
    usage: str | None = None


class Commands(BaseModel):
    intro: str
    commands: list[Command]


@router.get("/commands")
async def commands(_me: Me) -> Commands:
    """The chat commands (`/name`), in the order `/help` lists them, each with its usage when it
    needs words after it."""
    return Commands(
        intro=HELP_INTRO,
        commands=[Command(name=name, about=about, usage=USAGE.get(name)) for name, about in CHAT_COMMANDS],
    )
