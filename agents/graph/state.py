"""The lead agent's thread state: LangChain's AgentState plus DeerFlow's fields and reducers."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState
from typing_extensions import TypedDict

from bus.layout import OUTPUTS, UPLOADS, WORKSPACE


class ThreadData(TypedDict, total=False):
    """Where this thread's files are, as the agent sees them (virtual paths)."""

    user_id: str
    workspace_path: str
    uploads_path: str
    outputs_path: str


class SandboxState(TypedDict, total=False):
    sandbox_id: str


class ViewedImage(TypedDict, total=False):
    base64: str
    mime_type: str


def merge_artifacts(current: list[str] | None, new: list[str] | None) -> list[str]:
    """Append new artifact paths, keeping first-seen order and no duplicates."""
    merged = list(current or [])
    for path in new or []:
        if path not in merged:
            merged.append(path)
    return merged


def merge_viewed_images(
    current: dict[str, ViewedImage] | None, new: dict[str, ViewedImage] | None
) -> dict[str, ViewedImage]:
    """Merge by path; an empty dict clears them (after the model has seen them)."""
    if new is not None and len(new) == 0:
        return {}
    return {**(current or {}), **(new or {})}


class ThreadState(AgentState[Any]):
    sandbox: NotRequired[SandboxState | None]
    thread_data: NotRequired[ThreadData | None]
    title: NotRequired[str | None]
    artifacts: NotRequired[Annotated[list[str], merge_artifacts]]
    todos: NotRequired[list[dict[str, Any]] | None]
    uploaded_files: NotRequired[list[dict[str, Any]] | None]
    viewed_images: NotRequired[Annotated[dict[str, ViewedImage], merge_viewed_images]]
    found_tools: NotRequired[Annotated[list[str], merge_artifacts]]  # deferred tools bound (tool_search)
    approved_tools: NotRequired[Annotated[list[str], merge_artifacts]]  # approved "always" in this thread


def thread_data(user_id: str) -> ThreadData:
    return {
        "user_id": user_id,
        "workspace_path": WORKSPACE,
        "uploads_path": UPLOADS,
        "outputs_path": OUTPUTS,
    }
