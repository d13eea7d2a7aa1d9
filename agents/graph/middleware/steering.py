"""SteeringMiddleware: messages sent while a run works join its turn before the next model call.

A `steer` run (multitask strategy) finds its thread busy and hands its messages to the running run
(`agents.runner.steering`); they wait in the run's context (`RunContext.steering`) until the agent
is about to call the model again, and are added to the thread's messages there, so the model
changes course without the run's work being lost. What arrives after the last model call, the runner
hands over by running the agent on from this node (`STEERING_NODE`, `agents.runner.steps`).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import convert_to_messages

log = logging.getLogger(__name__)

STEERING_NODE = "SteeringMiddleware.before_model"  # its graph node: where a run goes on with them


class SteeringMiddleware(AgentMiddleware):
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        steering = getattr(getattr(runtime, "context", None), "steering", None)
        if not steering:
            return None
        taken, steering[:] = list(steering), []
        log.info("%d steering message(s) added before the model call", len(taken))
        return {"messages": convert_to_messages(taken)}
