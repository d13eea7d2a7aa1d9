"""A platform that cannot be reached when `antler up` starts takes nothing else down.

`antler up` with the Telegram bot enabled, its Bot API (the fake, `tests/fakes/telegram_server.py`)
not listening yet on the port the config names: Antler comes up all the same, the gateway answers
and `antler send` gets its answer, while `/health` says `degraded` and names telegram with the
reason. Then the fake starts on that port: the adapter, retried with backoff, connects, a Telegram
message is answered and `/health` is `ok` again. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import finished
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support.antler_up import AntlerUp, answer_to, antler_in
from tests.support.ports import free_port

pytestmark = [pytest.mark.xdist_group("antler-up-outage"), pytest.mark.timeout(300)]


async def health_until(gateway: str, check: Any, timeout: float = 90.0) -> dict[str, Any]:
    """`/health`'s body once `check(status code, body)` holds (polled: it changes as components do)."""
    deadline = time.monotonic() + timeout
    seen: tuple[int, Any] = (0, None)
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        while time.monotonic() < deadline:
            answer = await http.get("/health")
            seen = (answer.status_code, answer.json())
            if check(*seen):
                return dict(seen[1])
            await asyncio.sleep(0.2)
    raise AssertionError(f"/health never got there within {timeout:g}s; last: {seen}")


async def test_telegram_unreachable_at_start_leaves_the_rest_serving_and_recovers_when_it_is_back(
    tmp_path: Path,
) -> None:
    port = free_port()  # where the fake Telegram will listen, later
    telegram = FakeTelegram()
    telegram.port = port
    async with FakeOpenAI(api_key="sk-test") as model:
        config = {
            "models": [{"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}],
            "gateway": {"port": 0},
            "runner": {"processes": 2},  # the default on two cores, said outright
            "channels": {
                "telegram": {"enabled": True, "bot_token": telegram.token, "base_url": telegram.base_url}
            },
            # Short pauses between tries, so the test does not wait out a minute's backoff.
            "bus": {"restart_max_delay_seconds": 2},
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        up = AntlerUp(tmp_path)
        try:
            await up.start(runners=2)
            gateway = await up.gateway_url()

            body = await health_until(gateway, lambda code, body: "telegram" in body.get("unhealthy", {}))
            assert body["status"] == "degraded", body
            reason = body["unhealthy"]["telegram"]
            assert f"cannot reach 127.0.0.1:{port}" in reason, reason
            assert "retrying" in reason, reason

            # The other ways in are served meanwhile: a script's chat, and the HTTP API.
            send = await antler_in(tmp_path, "send", "OUTAGE-SEND hello", "--chat", "outage-1")
            code, out, err = await finished(send, 90)
            assert code == 0, err
            assert out.strip() == "You said: OUTAGE-SEND hello"
            async with httpx.AsyncClient(base_url=f"{gateway}/api", timeout=90) as http:
                assert await answer_to(http, "outage ping") == "You said: outage ping"

            log = up.log()
            assert "telegram: unhealthy — cannot reach" in log, up.tail()
            assert "Traceback" not in log, "one line per attempt, no traceback:\n" + up.tail()

            async with telegram:  # Telegram is back, on the port the config names
                await telegram.wait_for("getMe", timeout=60)
                telegram.send_user_message("TG-BACK are you there?")

                def answered() -> bool:
                    return any(
                        method in ("sendMessage", "editMessageText")
                        and "You said: TG-BACK are you there?" in str(params.get("text"))
                        for method, params in telegram.calls
                    )

                await telegram.wait(answered, timeout=90)
                body = await health_until(
                    gateway, lambda code, body: code == 200 and "telegram" not in body.get("unhealthy", {})
                )
                assert body["status"] == "ok", body
                stopped = await up.stop(90)  # Telegram still there: the adapter stops cleanly
            assert stopped == 0, f"antler up did not stop cleanly ({stopped}):\n{up.tail()}"
        finally:
            await up.kill_all()
        assert up.violations() == []
