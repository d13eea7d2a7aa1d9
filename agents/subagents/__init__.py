"""Subagents: the lead's `task` tool and the executor component that runs what it hands out.

- `component`: `antler run subagents` (`run(bus, config)`): the consumer of SubagentTasks, with
  LangChain loaded on the first task; `stops`: cancellations kept for tasks still to arrive.
- `executor`: `SubagentExecutor`, a task run to its result (loaded by `component`).
- `types`: the subagent types (`general-purpose`, `bash`, and `subagents.agents`).
- `task_tool`: the lead's `task` tool, which the runner binds (it publishes the task and relays
  its progress).
- `background`: tasks started in the background, `list_background_tasks` and
  `cancel_background_task`, and the run that reports an outcome; `background_commands`: bash's
  `run_in_background`, a background task the executor has a sandbox broker run.

Importing this package loads no LangChain (`antler up` hosts the executor beside components that
need none).
"""

from agents.subagents.component import EXECUTOR_DURABLE, run

__all__ = ["EXECUTOR_DURABLE", "run"]
