"""The threads service (`<prefix>.threads.*`) and what it keeps about a thread besides its runs.

- `service`: the micro service every runner process serves (create, patch, delete, state,
  history, update_state, check_run, suggestions, goal, compact); it is given the stores it
  works on (`ThreadService`), not the runner.
- `snapshots`: the thread's checkpoints read and written through a state-only graph.
- `compact`: compaction on demand; `suggestions`: follow-up questions from a model.
- `goal`: goal mode: the thread's goal set and cleared (`change_goal`), and judged after each run
  (`GoalLoop`, which the runner drives).
"""

from agents.threads.service import ThreadService, serve_threads

__all__ = ["ThreadService", "serve_threads"]
