"""What the tests of the two Weixin platforms (WeChat official accounts, WeCom) check alike: each
fake names its message API (`send`) and its access token call (`token`)."""

from __future__ import annotations

from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.fakes.wechat_server import FakeWeChat
from tests.fakes.wecom_server import FakeWeCom


def asked(fake_model: FakeOpenAI) -> list[str]:
    """What the model was asked, run by run."""
    return [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]


async def the_retry_ran_nothing(fake: FakeWeChat | FakeWeCom, fake_model: FakeOpenAI, send: str) -> None:
    """After "hello" was delivered twice: it is answered, the next message too, and each ran once."""
    await fake.wait_for(send)
    await fake.send_text("last one")
    await fake.wait_for(send, count=2)
    assert asked(fake_model) == ["hello", "last one"], "the retry ran nothing"
    assert len(fake.sent) == 2


async def an_expired_token_is_fetched_again(
    fake: FakeWeChat | FakeWeCom, fake_model: FakeOpenAI, send: str, token: str
) -> None:
    """An answer sent with a token the platform has expired is sent again with a new one."""
    await fake.send_text("first")
    await fake.wait_for(send)
    fake.expire_tokens()
    fake_model.script(Reply(text="Second answer."))
    await fake.send_text("second")
    await fake.wait_for(send, count=2)
    assert fake.texts()[-1] == "Second answer."
    assert (send, 42001) in fake.refusals
    assert len(await fake.wait_for(token, count=2)) == 2
