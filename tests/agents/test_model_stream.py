"""A streamed answer arrives whole and in order, in fewer chunks when they come faster than they are read.

Through langchain-openai's ChatOpenAI (as the runner makes it) against the fake model over HTTP.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessageChunk

from config import AppConfig
from config.loader import _build
from llm.http import close_clients, shared_client
from llm.models import create_chat_model
from llm.streaming import CoalescingStream, _Lines, merge_chunks
from tests.fakes.http_proxy import AnsweringProxy
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall

WORDS = " ".join(f"w{i}" for i in range(60))


def model_for(fake: FakeOpenAI) -> Any:
    cfg = _build(
        AppConfig,
        {"models": [{"name": "m", "model": "m", "api_key": "sk-test", "base_url": fake.base_url}]},
        "config.yaml",
    )
    return create_chat_model(cfg)


async def chunks_of(model: Any, slow: float = 0.0) -> list[AIMessageChunk]:
    got: list[AIMessageChunk] = []
    async for chunk in model.astream("hello"):
        got.append(chunk)
        if slow:
            await asyncio.sleep(slow)  # a busy consumer: the rest of the answer arrives meanwhile
    return got


async def test_a_slow_reader_gets_the_whole_answer_in_fewer_chunks(fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text=WORDS))
    got = await chunks_of(model_for(fake_model), slow=0.02)
    assert "".join(str(c.content) for c in got) == WORDS
    assert len(got) < 20, f"60 words read slowly should come in a few chunks, came in {len(got)}"
    whole = sum(got[1:], got[0])
    assert whole.usage_metadata
    assert whole.usage_metadata["output_tokens"] == 60
    assert whole.response_metadata.get("finish_reason") == "stop"


async def test_a_paced_answer_comes_a_chunk_per_window_not_a_chunk_per_token(fake_model: FakeOpenAI) -> None:
    # A real model: a token every 15 ms. Read as fast as they come, each would be a chunk of its own.
    fake_model.script(Reply(text=WORDS, chunk_delay=0.015))
    got = await chunks_of(model_for(fake_model))
    texts = [str(c.content) for c in got if c.content]
    assert "".join(texts) == WORDS
    assert texts[0] == "w0", "the first word goes on alone, not held for the ones after it"
    assert len(texts) < 20, f"60 words 15 ms apart should come in about 10 chunks, came in {len(texts)}"


async def test_the_end_of_a_paced_answer_is_not_held_for_the_rest_of_its_window(
    fake_model: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between chunks the stream takes what arrives until the window (on a grid shared by the
    # process's streams) has passed; the answer's end cuts that wait short, however long the window.
    # A window so long that no grid point falls within the answer (one of 60 s did, 1 run in ~60).
    monkeypatch.setattr(CoalescingStream, "window", 1e9)
    fake_model.script(Reply(text=WORDS, chunk_delay=0.015))
    async with asyncio.timeout(20):  # a held end would wait out the window
        got = await chunks_of(model_for(fake_model))
    texts = [str(c.content) for c in got if c.content]
    assert "".join(texts) == WORDS
    assert texts[0] == "w0", "the first word goes on at once"
    assert len(texts) == 2, "the rest comes when the answer ends"


async def test_the_first_word_is_passed_on_before_the_rest_arrives(fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="one two three", chunk_delay=0.3))
    got = await chunks_of(model_for(fake_model))
    texts = [str(c.content) for c in got if c.content]
    assert texts == ["one", " two", " three"], "words sent apart are not held back to be merged"


async def test_tool_call_arguments_streamed_in_pieces_come_out_whole(fake_model: FakeOpenAI) -> None:
    long_text = "line\n" * 400
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/a.txt", "content": long_text}),
                ToolCall("bash", {"command": "wc -l a.txt"}),
            ]
        )
    )
    got = await chunks_of(model_for(fake_model), slow=0.02)
    whole = sum(got[1:], got[0])
    calls = [(c["name"], c["args"]) for c in whole.tool_calls]
    assert calls == [
        ("write_file", {"path": "/mnt/user-data/outputs/a.txt", "content": long_text}),
        ("bash", {"command": "wc -l a.txt"}),
    ]


async def test_reasoning_and_answer_are_never_merged_into_one_chunk(fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="The answer is 4.", reasoning="two plus two is four"))
    got = await chunks_of(model_for(fake_model), slow=0.02)
    for chunk in got:
        assert not (chunk.content and chunk.additional_kwargs.get("reasoning_content")), chunk
    thinking = "".join(c.additional_kwargs.get("reasoning_content", "") for c in got)
    assert thinking == "two plus two is four"
    assert "".join(str(c.content) for c in got) == "The answer is 4."
    first_answer = next(i for i, c in enumerate(got) if c.content)
    assert all(not c.additional_kwargs.get("reasoning_content") for c in got[first_answer:])


async def test_an_error_in_the_stream_is_raised_after_the_text_before_it(fake_model: FakeOpenAI) -> None:
    fake_model.script(Reply(text="partial answer", stream_error="the model overloaded"))
    got: list[str] = []

    async def read_slowly() -> None:
        async for chunk in model_for(fake_model).astream("hello"):
            got.append(str(chunk.content))
            await asyncio.sleep(0.02)  # slow: the rest and the error arrive in one read

    with pytest.raises(openai.APIError, match="the model overloaded"):
        await read_slowly()
    assert "".join(got) == "partial answer"


def test_stream_data_json_refuses_is_still_read() -> None:
    from types import SimpleNamespace

    from llm.streaming import CoalescingStream

    parsed = CoalescingStream._parsed(SimpleNamespace(response=None), '{"n": NaN, "s": "\\ud83d"}')  # type: ignore[arg-type]
    assert parsed["s"] == "\ud83d"
    assert parsed["n"] != parsed["n"]  # NaN


def test_sse_lines_cut_anywhere_between_reads_parse_the_same() -> None:
    stream = b'data: {"a": 1}\r\n\r\ndata: {"b":\r\ndata: 2}\r\n\r\n: comment\n\ndata: [DONE]\r\n\r\n'
    whole = _Lines().feed(stream)
    for cut in range(1, len(stream)):
        lines = _Lines()
        assert lines.feed(stream[:cut]) + lines.feed(stream[cut:]) == whole, f"cut at {cut}"
    for first, second in ((b"data: x\r", b"\ndata: y\r\n"), (b"data: x\r", b"\r\n")):
        lines = _Lines()
        assert lines.feed(first) + lines.feed(second) == (first + second).splitlines()
    lines = _Lines()  # a CRLF cut in two, then lines ending in LF only
    assert lines.feed(b"data: a\r") + lines.feed(b"\nxx") + lines.feed(b"\n\n") == [b"data: a", b"xx", b""]


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n', id="plain"),
        pytest.param(b'data: {"a":\ndata: 1}\n\n', id="data-over-two-lines"),
        pytest.param(b": keep-alive\n\ndata: 1\n\n\n\ndata: 2\n\n", id="comments-and-blank-lines"),
        pytest.param(b"event: error\ndata: 1\n\ndata: 2\nevent: x\n\n", id="event-fields"),
        pytest.param(b"data:1\ndata: 2\n\ndata:3\n\n", id="data-without-space"),
        pytest.param(b"id: 7\ndata: 1\n\n\ndata: 2\nretry: 10\n\nretry: 5\n\n", id="ids-and-retries"),
        pytest.param(b"data: 1\nfoo: bar\ndata: 2\n\nevent: only\n\n", id="unknown-fields-event-alone"),
        pytest.param('data: "héllo 🦌"\n\n'.encode(), id="utf-8"),
    ],
)
def test_server_sent_events_read_as_the_sdks_decoder_reads_them(stream: bytes) -> None:
    from openai._streaming import SSEDecoder

    from llm.streaming import _Events

    lines = _Lines().feed(stream)
    decoder = SSEDecoder()
    expected = [sse.data for line in lines if (sse := decoder.decode(line.decode())) is not None]
    assert _Events(SSEDecoder()).feed(lines) == expected
    one_by_one = _Events(SSEDecoder())
    assert [event for line in lines for event in one_by_one.feed([line])] == expected


def test_only_deltas_that_concatenate_are_merged() -> None:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return {"id": "c", "choices": choices, **extra}

    merged = list(
        merge_chunks(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}),
                chunk({"reasoning_content": "hmm"}),  # another kind of text: apart
                chunk({"content": "!"}),
                chunk({}, "stop"),
                chunk({"content": "after the end"}),  # a finished choice takes nothing more
                chunk(None, usage={"total_tokens": 3}),
            ]
        )
    )
    deltas = [
        (c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) if c["choices"] else c for c in merged
    ]
    assert deltas == [
        ({"role": "assistant", "content": "Hello"}, None),
        ({"reasoning_content": "hmm"}, None),
        ({"content": "!"}, "stop"),
        ({"content": "after the end"}, None),
        {"id": "c", "choices": [], "usage": {"total_tokens": 3}},
    ]
    calls = list(
        merge_chunks(
            [
                chunk(
                    {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x"'}}]}
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
                chunk(
                    {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}
                ),
            ]
        )
    )
    assert [c["choices"][0]["delta"]["tool_calls"][0]["function"] for c in calls] == [
        {"name": "f", "arguments": '{"x": 1}'},
        {"name": "g", "arguments": "{}"},
    ]


async def test_a_model_answers_from_one_event_loop_after_another(fake_model: FakeOpenAI) -> None:
    """Connections belong to the loop that opened them: a model used from a second loop (a
    component restarted in the same process, a script) still gets its answers."""
    model = model_for(fake_model)

    async def ask(question: str) -> str:
        return str((await model.ainvoke(question)).content)

    fake_model.script(Reply(text="first loop"), Reply(text="second loop"), Reply(text="this loop"))
    # Each in a loop of its own, one after the other, while this test's loop serves the fake.
    assert await asyncio.to_thread(asyncio.run, ask("one")) == "first loop"
    assert await asyncio.to_thread(asyncio.run, ask("two")) == "second loop"
    assert await ask("three") == "this loop"


async def test_models_go_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    async with AnsweringProxy("via the proxy") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        shared_client.cache_clear()  # the environment is read when an endpoint's client is made
        try:
            cfg = _build(
                AppConfig,
                {
                    "models": [
                        {"name": "m", "model": "m", "api_key": "k", "base_url": "http://model.invalid/v1"}
                    ]
                },
                "config.yaml",
            )
            answer = await create_chat_model(cfg).ainvoke("hello")
        finally:
            await close_clients()
            shared_client.cache_clear()
    assert answer.content == "via the proxy"
    assert proxy.targets == ["POST http://model.invalid/v1/chat/completions"]


async def test_bound_tools_reach_the_model_as_langchain_openai_formats_them(fake_model: FakeOpenAI) -> None:
    """Each tool's OpenAI form is made once and reused; what the model is sent does not change."""
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from agents.tools import ask_clarification, present_files

    @tool(extras={"defer_loading": True})
    def lookup(city: str, days: int = 3) -> str:
        """Look up the weather of a city for some days."""
        return city

    tools = [ask_clarification, present_files, lookup]
    expected = [convert_to_openai_tool(t) for t in tools]
    expected[2]["defer_loading"] = True
    model = model_for(fake_model).bind_tools(tools)
    fake_model.script(Reply(text="one"), Reply(text="two"))
    await model.ainvoke("first")
    await model.ainvoke("second")
    assert [r["tools"] for r in fake_model.requests[-2:]] == [expected, expected]
    strict = model_for(fake_model).bind_tools([lookup], strict=True)
    fake_model.script(Reply(text="three"))
    await strict.ainvoke("third")
    assert fake_model.requests[-1]["tools"][0]["function"]["strict"] is True


async def test_a_request_reaches_the_model_as_the_sdk_would_send_it(fake_model: FakeOpenAI) -> None:
    """The request body is encoded by us, not the SDK: text in any script arrives as written, the
    model's `extra_body` fields are still merged in, and numbers keep their value."""
    cfg = _build(
        AppConfig,
        {
            "models": [
                {
                    "name": "m",
                    "model": "m",
                    "api_key": "sk-test",
                    "base_url": fake_model.base_url,
                    "temperature": 0.25,
                    "extra_body": {"top_k": 5},
                },
                {"name": "plain", "model": "m", "api_key": "sk-test", "base_url": fake_model.base_url},
            ]
        },
        "config.yaml",
    )
    text = 'héllo 日本語 "quoted" \\ emoji 🦌 \u2028 end'
    fake_model.script(Reply(text="one"), Reply(text="two"))
    await create_chat_model(cfg, "m").ainvoke(text)
    await create_chat_model(cfg, "plain").ainvoke(text)
    with_extra, plain = fake_model.requests[-2:]
    assert with_extra["top_k"] == 5
    assert with_extra["temperature"] == 0.25
    assert [m["content"] for m in with_extra["messages"]] == [text]
    assert [m["content"] for m in plain["messages"]] == [text]
    assert plain["model"] == "m"
