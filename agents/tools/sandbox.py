"""The agent's sandbox tools: bash, ls, read_file, write_file, str_replace, glob, grep.

Each is a request to the sandbox broker through `sandbox.client` (the sandbox's
client side) for the run's user and thread, taken from the run context, so the
runner never touches the files itself. Failures come back to the model as
readable tool errors, in a tool message with `status="error"` (a `ToolException`
that LangChain turns into one), so every client (our UI, the SDK, DeerFlow's UI,
the chat router) sees the step as failed. A command that ran and exited non-zero
is not a failed step (grep finding nothing exits 1): its exit code is in the text;
a command killed at its time limit is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.types import Command

from agents.tools.decorator import tool
from bus import Bus
from bus.layout import USER_DATA
from sandbox.client import SandboxClient
from sandbox.errors import SandboxError


def _client(bus: Bus, runtime: ToolRuntime[Any, Any]) -> SandboxClient:
    context = runtime.context
    return SandboxClient(bus, getattr(context, "user_id", "default"), getattr(context, "thread_id", ""))


def _error(exc: SandboxError) -> str:
    return f"Error ({exc.code}): {exc.message}"


def _failed(exc: SandboxError) -> ToolException:
    """The failure as LangChain's tool error: the model reads the text, the message says `error`."""
    return ToolException(_error(exc))


# bash's `run_in_background`: `await start(runtime, command, timeout_seconds)` is what the model
# reads (a ToolException when it cannot start). The runner's is
# `agents.subagents.background_commands.starter`.
BackgroundStarter = Callable[[ToolRuntime[Any, Any], str, float | None], Awaitable[str]]


def make_sandbox_tools(bus: Bus, background: BackgroundStarter | None = None) -> list[BaseTool]:
    """The tools, bound to one bus connection; `background` starts bash's background commands
    (None: commands run in the foreground only, as a subagent's do)."""

    @tool
    async def bash(
        command: str,
        runtime: ToolRuntime[Any, Any],
        timeout_seconds: float | None = None,
        run_in_background: bool = False,
    ) -> str:
        """Run a bash command in the sandbox and return its output (stdout and stderr together).

        The working directory is /mnt/user-data/workspace. Uploaded files are in
        /mnt/user-data/uploads (read-only); put deliverables in /mnt/user-data/outputs.
        Network access is what the administrator allowed (none by default); a refused connection
        is reported after the output.

        Args:
            command: The command.
            timeout_seconds: A shorter time limit than the sandbox's.
            run_in_background: For a long command (a build, a big download, a long computation):
                start it and answer at once with its task id instead of waiting; its output and exit
                code come back to this conversation as a new message when it ends. Tell the user it
                is running; list_background_tasks shows it, cancel_background_task kills it.
        """
        context = runtime.context
        if run_in_background:
            if background is None:
                raise ToolException("Error: commands cannot run in the background here; run it without it")
            return await background(runtime, command, timeout_seconds)
        try:
            result = await _client(bus, runtime).exec(
                command,
                timeout=timeout_seconds,
                egress=getattr(context, "egress", None),  # the run's (access.egress), enforced by the broker
                run_id=getattr(context, "run_id", None),
            )
        except SandboxError as exc:
            raise _failed(exc) from exc
        lines = [result.output.rstrip("\n")] if result.output else []
        if result.timed_out:
            limit = f" than {result.timeout_seconds:g}s" if result.timeout_seconds else ""
            lines.append(f"[the command ran longer{limit} and was killed with all its processes]")
        elif result.exit_code not in (0, None):
            lines.append(f"[exit code {result.exit_code}]")
        lines += [f"[{w}]" for w in result.warnings]
        if result.timed_out:
            raise ToolException("\n".join(lines))
        return "\n".join(lines) or "(no output)"

    @tool
    async def ls(runtime: ToolRuntime[Any, Any], path: str = USER_DATA) -> str:
        """List a directory as a tree, two levels deep. Paths are absolute, e.g. /mnt/user-data/workspace."""
        try:
            return (await _client(bus, runtime).list_dir(path)).tree
        except SandboxError as exc:
            raise _failed(exc) from exc

    @tool
    async def read_file(
        path: str, runtime: ToolRuntime[Any, Any], start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Read a text file, optionally only lines start_line to end_line (1-based, inclusive)."""
        try:
            result = await _client(bus, runtime).read_file(path, start_line, end_line)
        except SandboxError as exc:
            raise _failed(exc) from exc
        return result.content if result.content else "(empty file)"

    @tool
    async def write_file(
        path: str, content: str, runtime: ToolRuntime[Any, Any], append: bool = False
    ) -> str:
        """Write a text file (creating folders as needed); it is overwritten unless append is true.

        Write under /mnt/user-data/workspace, or /mnt/user-data/outputs for files the user should get.
        """
        try:
            result = await _client(bus, runtime).write_file(path, content, append)
        except SandboxError as exc:
            raise _failed(exc) from exc
        return f"{'Appended' if append else 'Wrote'} {result.bytes_written} bytes to {path}"

    @tool
    async def str_replace(
        path: str, old_str: str, new_str: str, runtime: ToolRuntime[Any, Any], replace_all: bool = False
    ) -> str:
        """Replace old_str with new_str in a file.

        old_str must match exactly and only once, unless replace_all is true.
        """
        try:
            result = await _client(bus, runtime).str_replace(path, old_str, new_str, replace_all)
        except SandboxError as exc:
            raise _failed(exc) from exc
        return f"Replaced {result.replacements} occurrence(s) in {path}"

    @tool
    async def glob(pattern: str, runtime: ToolRuntime[Any, Any], path: str = USER_DATA) -> str:
        """Find files by name pattern under a directory, e.g. pattern '**/*.py'."""
        try:
            result = await _client(bus, runtime).glob(pattern, path)
        except SandboxError as exc:
            raise _failed(exc) from exc
        if not result.paths:
            return "No files match."
        return "\n".join(result.paths) + ("\n[... more matches not shown ...]" if result.truncated else "")

    @tool
    async def grep(
        pattern: str,
        runtime: ToolRuntime[Any, Any],
        path: str = USER_DATA,
        glob: str | None = None,
        ignore_case: bool = False,
    ) -> str:
        """Search file contents with a regular expression; glob (e.g. '*.md') narrows which files."""
        try:
            result = await _client(bus, runtime).grep(pattern, path, glob, ignore_case)
        except SandboxError as exc:
            raise _failed(exc) from exc
        if not result.matches:
            return "No matches."
        lines = [f"{m.path}:{m.line}: {m.text}" for m in result.matches]
        return "\n".join(lines) + ("\n[... more matches not shown ...]" if result.truncated else "")

    tools = [bash, ls, read_file, write_file, str_replace, glob, grep]
    for each in tools:
        each.handle_tool_error = True  # a ToolException becomes a tool message with status "error"
    return tools


def make_view_image_tool(bus: Bus) -> BaseTool:
    """`view_image`, for models that can see: the image is shown to the model on its next call."""

    @tool
    async def view_image(image_path: str, runtime: ToolRuntime[Any, Any]) -> Command[Any]:
        """Look at an image file (PNG, JPEG, GIF, WebP) in the sandbox, e.g. an upload or a chart you made."""
        call_id = runtime.tool_call_id or ""
        try:
            result = await _client(bus, runtime).read_binary(image_path)
        except SandboxError as exc:
            return Command(
                update={"messages": [ToolMessage(_error(exc), tool_call_id=call_id, status="error")]}
            )
        if not (result.content_type or "").startswith("image/"):
            message = f"Error: {image_path} is {result.content_type}, not an image"
            return Command(update={"messages": [ToolMessage(message, tool_call_id=call_id, status="error")]})
        return Command(
            update={
                "viewed_images": {image_path: {"base64": result.content, "mime_type": result.content_type}},
                "messages": [
                    ToolMessage(f"Loaded {image_path}; it is shown to you now.", tool_call_id=call_id)
                ],
            }
        )

    return view_image
