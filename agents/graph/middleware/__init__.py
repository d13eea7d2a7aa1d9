"""The lead agent's middlewares, in DeerFlow's order (see agents.graph.lead.build_middlewares)."""

from agents.graph.middleware.dangling import DanglingToolCallMiddleware
from agents.graph.middleware.finish_reasons import FinishReasonMiddleware
from agents.graph.middleware.limits import LoopDetectionMiddleware
from agents.graph.middleware.model_errors import LLMErrorHandlingMiddleware
from agents.graph.middleware.prompt import RunPromptMiddleware
from agents.graph.middleware.title import TitleMiddleware
from agents.graph.middleware.tool_telemetry import ToolTelemetryMiddleware
from agents.graph.middleware.view_image import ViewImageMiddleware

__all__ = [
    "DanglingToolCallMiddleware",
    "FinishReasonMiddleware",
    "LLMErrorHandlingMiddleware",
    "LoopDetectionMiddleware",
    "RunPromptMiddleware",
    "TitleMiddleware",
    "ToolTelemetryMiddleware",
    "ViewImageMiddleware",
]
