"""The agent runner component (`antler run runner`, `python -m agents`): RunRequests in, run events out.

Read top-down: `component` (`run(bus, config)`: the consumer, the control subscription, the
threads service) -> `runner` (`Runner`: a delivery's records, attempts, cancellation, the thread
taken) -> `steps` (`RunSteps`: a run marked running, made ready by `setup` and `graph_input`,
streamed, concluded) -> `active_run` (what the process keeps about a run, and how it ends).
Beside them: `toolset` (the runner's tools), `thread_claims` (one run per thread), `event_log`
(the run's events in order), `journal` (the run's history) and `endings` (runs that end without
running: refused, cancelled while pending, given up).
"""

from agents.runner.component import DURABLE, run
from agents.runner.runner import Runner, attempt_of
from agents.runner.toolset import build_tool_schemas

__all__ = ["DURABLE", "Runner", "attempt_of", "build_tool_schemas", "run"]
