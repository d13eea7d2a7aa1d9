"""`antler up` on a new data dir with the default toolbox setting uses the toolbox the installation
already has (the one `make install` built, shared by every data dir) and builds none: its sandboxed
`python3` imports pandas from its first command.

On the shared `antler up` (tests/support/shared_up.py): a new directory, a config.yaml that leaves
`sandbox.toolbox` alone, and no $ANTLER_TOOLBOX_PATH (tests/conftest.py sets none)."""

from __future__ import annotations

import httpx

from sandbox.toolbox import installation_root
from tests.fakes.openai_server import Reply, ToolCall
from tests.support.shared_up import SHARED_UP, SharedUp

pytestmark = SHARED_UP

PROBE = 'python3 -c \'import pandas, sys; print("pandas", pandas.__version__, "from", sys.prefix)\''


async def test_up_on_a_new_data_dir_uses_the_installed_toolbox_and_builds_none(shared_up: SharedUp) -> None:
    log = shared_up.up.log()
    shared = installation_root() / "python"
    assert f"sandbox toolbox: {shared} (up to date; shared by this installation)" in log, log[-3000:]
    assert "installing the sandbox toolbox" not in log
    assert "building it while Antler starts" not in log
    assert not (shared_up.data_dir / "toolbox").exists(), "nothing of its own in the new data dir"

    model = shared_up.model
    model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": PROBE})], when="TOOLBOX-SHARED"),
        Reply(text="pandas is there", when="/opt/toolbox/python"),
    )
    asked_before = len(model.agent_requests)
    async with httpx.AsyncClient(base_url=shared_up.gateway, timeout=120) as http:
        body = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "TOOLBOX-SHARED import pandas"}]},
        }
        reply = (await http.post("/api/runs/wait", json=body)).json()
    assert reply["messages"][-1]["content"] == "pandas is there", reply
    [result] = [
        r["messages"][-1]["content"]
        for r in model.agent_requests[asked_before:]
        if r["messages"][-1]["role"] == "tool"
    ]
    assert "pandas " in str(result), result
    assert "from /opt/toolbox/python" in str(result), "the toolbox's python, mounted in the sandbox"
