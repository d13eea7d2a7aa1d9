"""The lead agent's graph: how it is assembled, what it is told, and what wraps its calls.

- `lead`: `create_agent` with DeerFlow's middleware chain, compiled once per set of run options
  (`AgentCache`); `state`: the thread state and its reducers.
- `assembly` (with `prompt`): the system prompt with memory and skills, and the memory update a
  run leaves; `summarize`: summarization near the context window, memory first.
- `middleware/`: DeerFlow's middlewares, each inside the model or tool call; `guardrails`: the
  check before each tool call; `patches`: adjustments to LangChain and LangSmith.
- `run_check` and `state_update`: whether a run request or a state update fits the graph.
"""
