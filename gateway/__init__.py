"""The HTTP gateway: DeerFlow's REST API, the LangGraph-compatible API, SSE, web UI.

Lands with the gateway issue; nothing here yet.
"""
