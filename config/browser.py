"""The `browser` section: the browser component (Playwright driving the system's Chromium)."""

from __future__ import annotations

from pydantic import Field

from config._env import Section


class BrowserConfig(Section):
    """The browser component and the agent's `browser_*` and `web_capture` tools."""

    enabled: bool = Field(
        False, description="Start the browser component with `antler up` and give the agent its tools."
    )
    chromium: str = Field(
        "/usr/bin/chromium", description="Chromium's executable (Debian: apt-get install chromium)."
    )
    chromium_flags: list[str] = Field(
        default_factory=list, description="Extra command-line flags for Chromium."
    )
    allow_private_networks: bool = Field(
        False,
        description="Also open loopback, private, link-local and metadata addresses (as web_fetch's option).",
    )
    idle_seconds: float = Field(300.0, gt=0, description="A thread's page is closed after this long unused.")
    max_sessions: int = Field(16, ge=1, description="Threads' pages one browser process keeps open at once.")
    timeout_seconds: float = Field(30.0, gt=0, description="Longest wait for a page to load or an action.")
    max_text_chars: int = Field(8000, ge=256, description="Longest page text handed to the model.")
    viewport_width: int = Field(1280, ge=200)
    viewport_height: int = Field(720, ge=200)
