"""The built-in tools every lead agent has: `ask_clarification` and `present_files`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from bus.layout import OUTPUTS


@tool(return_direct=True, response_format="content_and_artifact")
def ask_clarification(
    question: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
    clarification_type: Literal[
        "missing_info", "ambiguous_requirement", "approach_choice", "risk_confirmation", "suggestion"
    ] = "missing_info",
    context: str | None = None,
    options: list[str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Ask the user a question and stop until they answer.

    Use it when the request is missing information you cannot find yourself, is
    ambiguous, or before something risky. Ask one clear question; offer options
    when the choices are known.
    """
    lines = [context.strip()] if context else []
    lines.append(question.strip())
    choices = [o.strip() for o in options or [] if o and o.strip()]
    for number, option in enumerate(choices, 1):
        lines.append(f"{number}. {option}")
    # What a UI shows as a question card with buttons (DeerFlow's human_input request).
    request: dict[str, Any] = {
        "version": 1,
        "kind": "human_input_request",
        "source": "ask_clarification",
        "request_id": f"clarify-{tool_call_id}",
        "tool_call_id": tool_call_id,
        "clarification_type": clarification_type,
        "question": question.strip(),
        "input_mode": "choice_with_other" if choices else "free_text",
        "context": context,
    }
    if choices:
        request["options"] = [
            {"id": f"option-{n}", "label": option, "value": option} for n, option in enumerate(choices, 1)
        ]
    return "\n".join(lines), {"human_input": request}


@tool
def present_files(filepaths: list[str], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Show files you created to the user. Only files under /mnt/user-data/outputs can be presented."""
    bad = [p for p in filepaths if not _is_output(p)]
    if bad:
        message = (
            f"Error: only files under {OUTPUTS} can be presented; move these there first: {', '.join(bad)}"
        )
        return Command(update={"messages": [ToolMessage(message, tool_call_id=tool_call_id, status="error")]})
    paths = [p.rstrip("/") for p in filepaths]
    return Command(
        update={
            "artifacts": paths,
            "messages": [
                ToolMessage(f"Presented {len(paths)} file(s) to the user.", tool_call_id=tool_call_id)
            ],
        }
    )


def _is_output(path: str) -> bool:
    parts = path.split("/")
    return path.startswith(OUTPUTS + "/") and ".." not in parts and len(path) > len(OUTPUTS) + 1
