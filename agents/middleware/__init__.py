"""The lead agent's middlewares, in DeerFlow's order (see agents.lead.build_middlewares)."""

from agents.middleware.dangling import DanglingToolCallMiddleware
from agents.middleware.finish_reasons import FinishReasonMiddleware
from agents.middleware.limits import LoopDetectionMiddleware
from agents.middleware.model_errors import LLMErrorHandlingMiddleware
from agents.middleware.prompt import RunPromptMiddleware
from agents.middleware.title import TitleMiddleware
from agents.middleware.tool_telemetry import ToolTelemetryMiddleware
from agents.middleware.view_image import ViewImageMiddleware

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
