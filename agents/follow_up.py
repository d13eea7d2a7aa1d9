"""A run one of our components starts on a thread after another run: what the agent reads is a
hidden user message (the chat does not show it), and the run inherits the earlier one's options and
chat origin, so its answer goes where the earlier run's went.

Two start one: a background task's outcome reported back (`agents.subagents.background`, from the
`BackgroundReport` its parent run left) and a goal's continuation (`agents.threads.goal`).
"""

from __future__ import annotations

from typing import Any

from bus.messages import BackgroundReport, RunRequest


def inherited(request: RunRequest) -> BackgroundReport:
    """What a run following `request` inherits from it: its options and chat origin."""
    return BackgroundReport.model_validate(request, from_attributes=True)


def follow_up_run(
    earlier: RunRequest | BackgroundReport,
    run_id: str,
    thread_id: str,
    user_id: str,
    prompt: str,
    *,
    kind: str,
    marks: dict[str, Any],
    metadata: dict[str, Any],
    **fields: Any,
) -> RunRequest:
    """The run after `earlier` on `thread_id`, asking the agent `prompt` in a hidden message.

    Args:
        kind: what the run is for, the start of its message's id (`<kind>-<run id>`).
        marks: what the hidden message carries besides `hide_from_ui`.
        metadata: added to the earlier run's metadata, whose `goal` is not inherited.
        fields: the request's other fields (`after`, `stream_subgraphs`, ...).
    """
    configurable = dict(earlier.config.get("configurable") or {})
    configurable.pop("checkpoint_id", None)  # the thread as it is now, not where the earlier run began
    message = {
        "role": "user",
        "content": prompt,
        "id": f"{kind}-{run_id}",
        "additional_kwargs": {"hide_from_ui": True, **marks},
    }
    return RunRequest(
        run_id=run_id,
        thread_id=thread_id,
        assistant_id=earlier.assistant_id,
        user_id=user_id,
        input={"messages": [message]},
        config={**earlier.config, "configurable": configurable},
        context=earlier.context,
        metadata={**{k: v for k, v in earlier.metadata.items() if k != "goal"}, **metadata},
        stream_mode=earlier.stream_mode,
        origin=earlier.origin,
        **fields,
    )
