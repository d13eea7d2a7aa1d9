"""Stops (a parent run cancelled, a task given up) as the executor keeps them, for tasks of that
parent still to arrive."""

REMEMBER_STOPS = 600.0  # seconds a stop is kept for tasks of that parent still to arrive

# (parent run, task or None for all of the parent's) -> (time.monotonic() when it came, why)
Stops = dict[tuple[str, str | None], tuple[float, str]]
