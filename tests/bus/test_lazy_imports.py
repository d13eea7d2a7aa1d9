"""bus/_lazy_imports.py: libraries a component process imports but rarely uses load when used."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def run_python(code: str) -> str:
    """`code` in a fresh interpreter with this checkout first on the path: its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_httpx_command_line_loads_only_when_called() -> None:
    out = run_python(
        "import sys, bus, httpx\n"
        "print('rich' in sys.modules, 'click' in sys.modules)\n"
        "from httpx import main\n"
        "try:\n"
        "    main(['--help'])\n"  # click prints the usage and exits
        "except SystemExit as exc:\n"
        "    print('exit', exc.code)\n"
        "print('rich' in sys.modules)\n"
    )
    lines = out.splitlines()
    assert lines[0] == "False False"
    assert any("Usage: httpx" in line for line in lines)
    assert lines[-2:] == ["exit 0", "True"]


def test_langgraph_sdk_client_loads_on_first_use_and_works() -> None:
    out = run_python(
        "import sys, bus, langgraph.graph\n"
        "print('langgraph_sdk._async' in sys.modules)\n"
        "from langgraph_sdk import get_client\n"
        "from langgraph_sdk.client import LangGraphClient\n"
        "client = get_client(url='http://127.0.0.1:9')\n"
        "print(type(client).__name__, isinstance(client, LangGraphClient))\n"
    )
    assert out.splitlines() == ["False", "LangGraphClient True"]


def test_langsmith_types_load_when_a_name_of_theirs_is_read_and_submodules_import_before() -> None:
    out = run_python(
        "import sys, bus, langchain_core.tracers.schemas\n"
        "print('langsmith.types.run' in sys.modules)\n"
        "from langsmith.types.run_select_field import RunSelectField\n"  # what LangChain's import needs
        "print('langsmith.types.run' in sys.modules)\n"
        "import langsmith\n"
        "from langsmith.types import Run\n"
        "import langsmith.types.run\n"
        "print(langsmith.types.Run is Run is langsmith.types.run.Run, 'ID' in RunSelectField.__args__)\n"
        "print(sys.modules['langsmith.types'].run_select_field.RunSelectField == RunSelectField)\n"
    )
    assert out.splitlines() == ["False", "False", "True True", "True"]


def test_openai_types_import_only_the_submodules_used_until_a_name_of_the_package_is_read() -> None:
    out = run_python(
        "import sys, bus, openai\n"
        "from openai.types import chat\n"  # a submodule: imported by itself
        "from openai.types.chat import ChatCompletion\n"
        "print('openai.types.eval_create_params' in sys.modules, chat.ChatCompletion is ChatCompletion)\n"
        "from openai.types import Completion\n"  # a name of the package: the package loads
        "print('openai.types.eval_create_params' in sys.modules, openai.types.Completion is Completion)\n"
        "print(openai.types.chat.ChatCompletion is ChatCompletion)\n"
    )
    assert out.splitlines() == ["False True", "True True", "True"]
