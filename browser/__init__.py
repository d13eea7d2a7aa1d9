"""The browser component: Chromium pages per thread for the agent's `browser_*` and `web_capture`
tools (`browser.service`), behind an egress proxy that keeps it to public addresses
(`browser.egress`). Importing the package loads neither Playwright nor the service."""

__all__: list[str] = []
