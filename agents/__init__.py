"""The lead agent, its middlewares, model factory and tools, the runner and subagent executor.

Lands with the agent runner issue; nothing here yet.
"""
