"""DeerFlow's REST API (models, MCP, skills, memory, uploads, artifacts, suggestions, messages)."""
