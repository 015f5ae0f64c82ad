"""Differential tests: our OpenAI drivers against the official `openai` SDK, on the same bytes.

Each recorded stream is served over real HTTP twice, once to the SDK's own stream
accumulator (`responses.stream(...).get_final_response()`,
`chat.completions.stream(...).get_final_completion()`) and once to our driver,
and the final results must agree. The SDK is a test-only dependency
(``openai>=1.92``, in the ``test`` extra); without it these tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from ipyagent.core import ModelCompleted, ModelFailed, ReasoningBlock  # noqa: E402
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver  # noqa: E402
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver  # noqa: E402

from ..support.recordings import FINISH_TO_KIND, check_shape, collect, reply_for, user_stack  # noqa: E402
from ..support.stub_server import FIXTURES, Reply, StubServer  # noqa: E402

MODEL = "test-model"
RESPONSES = sorted((FIXTURES / "openai-responses").glob("stream-*.sse")) + sorted(
    (FIXTURES / "openai-responses").glob("stream-*.chunks.jsonl")
)
CHAT = sorted((FIXTURES / "openai-chat").glob("*.sse"))


def _responses_reply(path: Path) -> Reply:
    """A Responses recording as the API sends it (named events, no [DONE])."""
    if path.suffix == ".sse":
        return Reply.sse_file(path)
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return Reply(pieces=[f"event: {json.loads(ln)['type']}\ndata: {ln}\n\n".encode() for ln in lines])


def _sdk(coro_factory: Any, url: str) -> Any:
    """Run `coro_factory(client)` with an SDK client on `url`; return its result or the exception."""

    async def main() -> Any:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0)
        try:
            return await coro_factory(client)
        except openai.OpenAIError as exc:
            return exc
        finally:
            await client.close()

    return asyncio.run(main())


def _both(reply: Reply, sdk_call: Any, driver_cls: type) -> tuple[Any, Any, StubServer]:
    with StubServer(reply) as server:  # the last reply repeats: both clients get the same bytes
        sdk_result = _sdk(sdk_call, server.url)
        events = collect(driver_cls(MODEL, base_url=server.url, api_key="sk-test", max_attempts=1), user_stack("hi"))
    assert len(server.requests) == 2
    return sdk_result, check_shape(events), server


# -- Responses -------------------------------------------------------------------------------


async def _sdk_response(client: Any) -> Any:
    async with client.responses.stream(model=MODEL, input="hi") as stream:
        return await stream.get_final_response()


@pytest.mark.parametrize("path", RESPONSES, ids=[p.name for p in RESPONSES])
def test_responses_stream_matches_the_sdk(path):
    final, terminal, _ = _both(_responses_reply(path), _sdk_response, OpenAIResponsesPromptDriver)

    if isinstance(final, Exception):
        # the SDK raises on the in-stream error; we report the same error
        assert isinstance(final, openai.APIError)
        assert isinstance(terminal, ModelFailed)
        assert terminal.error.message == final.message
        assert terminal.error.code == final.body["code"]
        assert terminal.partial.content == []
        return

    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    msg = terminal.message
    assert msg.text == final.output_text

    sdk_calls = [o for o in final.output if o.type == "function_call"]
    assert [(c.tag, c.native_name, c.input) for c in terminal.tool_calls] == [
        (c.call_id, c.name, json.loads(c.arguments)) for c in sdk_calls
    ]

    sdk_reasoning = [o for o in final.output if o.type == "reasoning"]
    ours = [b for b in msg.content if isinstance(b, ReasoningBlock)]
    assert [b.text for b in ours] == ["\n\n".join(s.text for s in r.summary) for r in sdk_reasoning]
    # The server encrypts a reasoning item afresh in every event that carries it (Fernet
    # tokens: new timestamp and IV), so the token we keep (from response.output_item.done,
    # as OpenAI's Codex client keeps it) differs in bytes from the one the SDK keeps (from
    # response.completed); the same length says the same state is inside.
    kept = [json.loads(b.signature) for b in ours]
    assert [(k["id"], len(k.get("encrypted_content") or "")) for k in kept] == [
        (r.id, len(r.encrypted_content or "")) for r in sdk_reasoning
    ]
    assert [k["summary"] for k in kept] == [[s.model_dump() for s in r.summary] for r in sdk_reasoning]

    u = final.usage
    assert (terminal.usage.input_tokens, terminal.usage.output_tokens, terminal.usage.total_tokens) == (
        u.input_tokens,
        u.output_tokens,
        u.total_tokens,
    )
    assert terminal.usage.cache_read_tokens == u.input_tokens_details.cached_tokens
    assert terminal.usage.reasoning_tokens == u.output_tokens_details.reasoning_tokens

    assert terminal.stop_reason.raw == final.status
    assert terminal.stop_reason == ("tool_use" if sdk_calls else "end_turn")
    assert terminal.metadata["request_id"] == final.id
    assert terminal.metadata["model"] == final.model


# -- Chat Completions ------------------------------------------------------------------------


async def _sdk_completion(client: Any) -> Any:
    async with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "hi"}]) as stream:
        try:
            return await stream.get_final_completion()
        except openai.LengthFinishReasonError as exc:
            return exc.completion  # the SDK refuses to "parse" a cut reply but keeps what came


def test_chat_fixture_set_is_present():
    assert len(CHAT) >= 10
    assert "stream-finish-reason-length.sse" in {p.name for p in CHAT}


@pytest.mark.parametrize("path", CHAT, ids=[p.name for p in CHAT])
def test_chat_stream_matches_the_sdk(path):
    completion, terminal, _ = _both(reply_for(path), _sdk_completion, OpenAIChatPromptDriver)
    assert not isinstance(completion, Exception), completion
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    choice = completion.choices[0]
    msg = terminal.message

    assert msg.text == (choice.message.content or "") + (choice.message.refusal or "")
    assert [(c.tag, c.native_name, c.input) for c in terminal.tool_calls] == [
        (t.id, t.function.name, json.loads(t.function.arguments) if t.function.arguments.strip() else {})
        for t in choice.message.tool_calls or []
    ]
    if completion.usage is None:
        assert (terminal.usage.input_tokens, terminal.usage.output_tokens) == (0, 0)
    else:
        u = completion.usage
        assert (terminal.usage.input_tokens, terminal.usage.output_tokens, terminal.usage.total_tokens) == (
            u.prompt_tokens,
            u.completion_tokens,
            u.total_tokens,
        )
    assert terminal.stop_reason.raw == choice.finish_reason
    assert terminal.stop_reason == FINISH_TO_KIND[choice.finish_reason]
