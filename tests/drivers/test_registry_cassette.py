"""The provider registry (ids, API keys) and cassette record/replay."""

from __future__ import annotations

import json
import os

import pytest

from ipyagent.core import ConfigurationError, ModelCompleted, ModelFailed, ProviderError
from ipyagent.drivers import BUILTIN, create_driver, parse_provider_id
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

from ..support.recordings import FIXTURES, check_shape, collect, expected_from, reply_for, user_stack
from ..support.stub_server import StubServer

TEXT_STREAM = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_STREAM = FIXTURES / "openai-chat" / "stream-tool-calls-parallel-two.sse"


@pytest.fixture
def clean_env(monkeypatch):
    for spec in BUILTIN.values():
        for var in (spec.api_key_env, spec.base_url_env):
            if var:
                monkeypatch.delenv(var, raising=False)
    return monkeypatch


# -- parse_provider_id ------------------------------------------------------------------


def test_parse_provider_id():
    assert parse_provider_id("openai:gpt-4.1-mini") == ("openai", "gpt-4.1-mini")
    assert parse_provider_id("  groq:llama-3.3-70b-versatile ") == ("groq", "llama-3.3-70b-versatile")


def test_parse_provider_id_keeps_colons_in_the_model():
    assert parse_provider_id("ollama:llama3.2:1b") == ("ollama", "llama3.2:1b")
    assert parse_provider_id("openrouter:google/gemini-2.0-flash-exp:free") == (
        "openrouter",
        "google/gemini-2.0-flash-exp:free",
    )


def test_unknown_provider_lists_the_known_ones():
    with pytest.raises(ConfigurationError) as info:
        parse_provider_id("nosuchprovider:model-x")
    msg = info.value.message
    assert "nosuchprovider" in msg
    for name in BUILTIN:
        assert name in msg
    assert info.value.type == "configuration"
    assert info.value.retryable is False
    assert isinstance(info.value, ProviderError)


@pytest.mark.parametrize("bad", ["gpt-4.1-mini", "openai:", "openai", ""])
def test_missing_colon_or_model(bad):
    with pytest.raises(ConfigurationError, match="PROVIDER:MODEL"):
        parse_provider_id(bad)


def test_replay_needs_a_path():
    with pytest.raises(ConfigurationError, match="cassette"):
        parse_provider_id("replay:")


# -- create_driver ----------------------------------------------------------------------


def test_missing_api_key_names_the_variable(clean_env):
    with pytest.raises(ConfigurationError) as info:
        create_driver("openai:gpt-4.1-mini")
    assert "OPENAI_API_KEY" in info.value.message
    with pytest.raises(ConfigurationError, match="GROQ_API_KEY"):
        create_driver("groq:llama-3.3-70b-versatile")


def test_api_key_from_environment(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-from-env-123")
    driver = create_driver("openai:gpt-4.1-mini")
    assert isinstance(driver, OpenAIChatPromptDriver)
    assert driver.id == "openai:gpt-4.1-mini"
    assert driver.base_url == "https://api.openai.com/v1"
    assert driver.headers()["Authorization"] == "Bearer sk-from-env-123"
    assert "sk-from-env-123" not in repr(driver)


def test_a_named_server_gets_no_key_unless_asked(clean_env):
    """The provider's key is not sent to another host: only with --api-key-env (api_key_env=)."""
    clean_env.setenv("OPENAI_API_KEY", "sk-not-for-strangers-123")
    with StubServer(reply_for(TEXT_STREAM), reply_for(TEXT_STREAM)) as server:
        collect(create_driver("openai:local-model", base_url=server.url))
        collect(create_driver("openai:local-model", base_url=server.url, api_key_env="OPENAI_API_KEY"))
    assert "authorization" not in {k.lower() for k in server.requests[0]["headers"]}
    assert server.requests[1]["headers"]["Authorization"] == "Bearer sk-not-for-strangers-123"


def test_base_url_from_the_providers_own_variable_gets_the_key(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-configured-456")
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert create_driver("openai:m").headers()["Authorization"] == "Bearer sk-configured-456"


@pytest.mark.parametrize("url, why", [("notaurl", "must start with http:// or https://"),
                                      ("http://[::1", "is not a valid URL")])
def test_a_base_url_variable_is_checked_as_base_url_is(clean_env, url, why):
    """Else the first request fails with the HTTP client's traceback (issue break-s12 section 8)."""
    clean_env.setenv("OPENAI_API_KEY", "sk-configured-456")
    clean_env.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigurationError, match=f"^the variable OPENAI_BASE_URL .*{why}"):
        create_driver("openai:m")
    assert create_driver("openai:m", base_url="http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"
    clean_env.setenv("OPENAI_BASE_URL", "")  # empty: the provider's own
    assert create_driver("openai:m").base_url == "https://api.openai.com/v1"


def test_custom_base_url_needs_no_key(clean_env):
    with StubServer(reply_for(TEXT_STREAM)) as server:
        driver = create_driver("openai:local-model", base_url=server.url)
        assert driver.base_url == server.url
        assert "Authorization" not in driver.headers()
        events = collect(driver)
    assert isinstance(events[-1], ModelCompleted)
    headers = {k.lower() for k in server.requests[0]["headers"]}
    assert "authorization" not in headers
    assert server.requests[0]["body"]["model"] == "local-model"


def test_ollama_needs_no_key_and_uses_its_default_url(clean_env):
    driver = create_driver("ollama:llama3.2:1b")
    assert driver.model == "llama3.2:1b"
    assert driver.provider == "ollama"
    from ipyagent.drivers.protocols.ollama import OllamaPromptDriver

    assert driver.base_url == OllamaPromptDriver.default_base_url


def test_create_driver_passes_options_through(clean_env):
    clean_env.setenv("OPENAI_API_KEY", "sk-x")
    driver = create_driver("openai:m", provider_options={"temperature": 0}, max_attempts=5)
    assert driver.max_attempts == 5
    assert driver.build_request(user_stack())[1]["temperature"] == 0
    with pytest.raises(ProviderError, match="bogus"):
        create_driver("openai:m", provider_options={"bogus": 1})


# -- cassettes --------------------------------------------------------------------------

SECRET = "sk-cassette-secret-0123456789"


def _record(tmp_path, monkeypatch, path=TEXT_STREAM, prompt="What's the weather?"):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    cassette = tmp_path / "c.jsonl"
    with StubServer(reply_for(path)) as server:
        driver = create_driver("openai:m", base_url=server.url, api_key_env="OPENAI_API_KEY", record=cassette)
        events = collect(driver, user_stack(prompt))
    # the key really went out on the wire, so its absence from the cassette means something
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    return cassette, events


def test_record_then_replay(tmp_path, clean_env):
    exp = expected_from(TEXT_STREAM)
    cassette, live = _record(tmp_path, clean_env)
    assert isinstance(live[-1], ModelCompleted)
    assert live[-1].message.text == exp.text

    text = cassette.read_text()
    assert SECRET not in text
    assert "authorization" not in text.lower()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert len(lines) == 1
    entry = lines[0]
    assert entry["provider"] == "openai" and entry["model"] == "m"
    assert entry["request"]["body"]["messages"] == [{"role": "user", "content": "What's the weather?"}]
    assert entry["response"]["status"] == 200
    assert entry["response"]["body"] == TEXT_STREAM.read_text()  # the bytes as received

    # replay: no server is running any more
    clean_env.delenv("OPENAI_API_KEY")
    replay = create_driver(f"replay:{cassette}")
    events = collect(replay, user_stack("What's the weather?"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelCompleted), getattr(terminal, "error", None)
    assert terminal.message.text == live[-1].message.text == exp.text
    assert terminal.usage.input_tokens == live[-1].usage.input_tokens
    assert terminal.metadata["replayed"] is True
    assert live[-1].metadata["replayed"] is False
    assert replay.model == "m"


def test_replay_of_tool_calls(tmp_path, clean_env):
    exp = expected_from(TOOL_STREAM)
    cassette, live = _record(tmp_path, clean_env, path=TOOL_STREAM, prompt="weather and stocks")
    events = collect(create_driver(f"replay:{cassette}"), user_stack("weather and stocks"))
    assert isinstance(events[-1], ModelCompleted)
    assert [c.input for c in events[-1].tool_calls] == [c["input"] for c in exp.tool_calls]
    assert events[-1].tool_calls == live[-1].tool_calls


def test_replay_of_a_different_prompt_fails(tmp_path, clean_env):
    cassette, _ = _record(tmp_path, clean_env)
    events = collect(create_driver(f"replay:{cassette}"), user_stack("Something else entirely"))
    terminal = check_shape(events)
    assert isinstance(terminal, ModelFailed)
    assert terminal.error.type == "configuration"
    assert "not in the cassette" in terminal.error.message
    assert cassette.name in terminal.error.message


def _conversation_stack(*pairs: tuple[str, str], prompt: str):
    from ipyagent.core import PromptStack

    stack = PromptStack()
    for asked, answered in pairs:
        stack.add_user_message(asked)
        stack.add_assistant_message(answered)
    stack.add_user_message(prompt)
    return stack


def test_a_recorded_question_asked_again_after_more_turns_gets_its_recorded_reply(tmp_path, clean_env):
    """A replayed cell run again: its request now carries the turns added since (its own
    included), which no exchange recorded; the question's recorded reply is served."""
    cassette, live = _record(tmp_path, clean_env)
    later = ("What's the weather?", live[-1].message.text), ("And tomorrow?", "Rain.")
    events = collect(create_driver(f"replay:{cassette}"), _conversation_stack(*later, prompt="What's the weather?"))
    assert isinstance(events[-1], ModelCompleted), getattr(events[-1], "error", None)
    assert events[-1].message.text == live[-1].message.text
    # another question after the same turns is still not recorded
    stack = _conversation_stack(*later, prompt="What's the weather in Oslo?")
    assert isinstance(check_shape(collect(create_driver(f"replay:{cassette}"), stack)), ModelFailed)


def test_reasked_at_finds_the_recorded_suffix_after_inserted_turns():
    from ipyagent.drivers.cassette import reasked_at

    def user(text):
        return {"role": "user", "content": text}

    def bot(text):
        return {"role": "assistant", "content": text}

    recorded = {"model": "m", "stream": True, "messages": [user("a"), bot("A"), user("b")]}
    again = {
        "model": "m",
        "stream": True,
        "messages": [user("a"), bot("A"), user("b"), bot("B"), user("c"), bot("C"), user("b")],
    }
    assert reasked_at(recorded, again) == 2  # the shared start: a, A
    with_tools = {
        **recorded,
        "messages": [*recorded["messages"], {"role": "assistant", "tool_calls": [1]}, {"role": "tool", "content": "r"}],
    }
    assert reasked_at(with_tools, {**again, "messages": [*again["messages"], *with_tools["messages"][3:]]}) == 2
    assert reasked_at(recorded, recorded) is None  # nothing inserted: an exact match is not this
    assert reasked_at(recorded, {**again, "model": "other"}) is None  # another option differs too
    assert reasked_at(recorded, {**again, "messages": [user("z"), *again["messages"]]}) is None  # another start
    assert (
        reasked_at(recorded, {**again, "messages": [*again["messages"][:-1], bot("b")]}) is None
    )  # the suffix must start at a user message
    # a suffix that would begin mid-turn (at an assistant message) is not a question asked again
    assert reasked_at({"messages": [user("a"), bot("A")]}, {"messages": [user("a"), user("x"), bot("A")]}) is None


def _replay_pacing(cassette, monkeypatch, **kw):
    """(events, the pauses the replay took) of one replay; pauses are recorded, not slept."""
    from ipyagent.drivers import cassette as cassette_module

    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(cassette_module, "asyncio", type("Clock", (), {"sleep": staticmethod(pause)}))
    return collect(create_driver(f"replay:{cassette}", **kw), user_stack("What's the weather?")), pauses


def test_replay_with_chunk_delay_paces_each_event_and_streams_the_same_text(tmp_path, clean_env):
    cassette, live = _record(tmp_path, clean_env)
    body = json.loads(cassette.read_text())["response"]["body"]
    events, pauses = _replay_pacing(cassette, clean_env, chunk_delay=0.25)
    sse_events = [event for event in body.split("\n\n") if event.strip()]
    assert sse_events[-1] == "data: [DONE]"
    assert set(pauses) == {0.25} and len(pauses) >= len(sse_events) - 1  # a pause between any two events
    assert len([e for e in events if e.type == "text_delta"]) > 1
    assert events[-1].message.text == live[-1].message.text
    # No delay: the body goes out whole, with no pause.
    events, pauses = _replay_pacing(cassette, clean_env)
    assert pauses == [] and events[-1].message.text == live[-1].message.text


def test_an_exchange_s_own_pace_replaces_the_chunk_delay_but_not_a_zero_one(tmp_path, clean_env):
    cassette, _ = _record(tmp_path, clean_env)
    entry = json.loads(cassette.read_text())
    cassette.write_text(json.dumps({**entry, "chunk_delay": 0.5}) + "\n")
    _, paced = _replay_pacing(cassette, clean_env, chunk_delay=0.25)
    _, unpaced = _replay_pacing(cassette, clean_env)
    assert set(paced) == {0.5} and unpaced == []


def test_replay_of_missing_or_bad_cassette(tmp_path):
    with pytest.raises(ConfigurationError, match="not found"):
        create_driver(f"replay:{tmp_path / 'nope.jsonl'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    with pytest.raises(ConfigurationError, match="not a cassette line"):
        create_driver(f"replay:{bad}")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigurationError, match="no exchanges"):
        create_driver(f"replay:{empty}")


def test_recorded_error_is_replayed(tmp_path, clean_env):
    body = FIXTURES / "openai-chat" / "error-404-model-not-found.json"
    from ..support.stub_server import Reply

    clean_env.setenv("OPENAI_API_KEY", SECRET)
    cassette = tmp_path / "err.jsonl"
    with StubServer(Reply.error_file(body, body.with_name("error-404-model-not-found.http.json"))) as server:
        live = collect(create_driver("openai:m", base_url=server.url, record=cassette))
    replayed = collect(create_driver(f"replay:{cassette}"))
    for events in (live, replayed):
        assert isinstance(events[-1], ModelFailed)
        assert events[-1].error.type == "not_found"
        assert json.loads(body.read_text())["error"]["message"] in events[-1].error.message
    assert SECRET not in cassette.read_text()


# -- a cassette that cannot be written ---------------------------------------------------------


def test_a_record_path_that_cannot_be_written_is_refused_before_sending(tmp_path, clean_env):
    (tmp_path / "file").write_text("x")
    for bad, why in ((tmp_path / "file" / "c.jsonl", "is a file, not a folder"), (tmp_path, "is a folder")):
        with pytest.raises(ConfigurationError, match=why):
            create_driver("openai:m", base_url="http://127.0.0.1:9/v1", record=bad)
    new_folder = tmp_path / "new" / "c.jsonl"  # missing folders are made at the first request
    assert create_driver("openai:m", base_url="http://127.0.0.1:9/v1", record=new_folder).transport.path == new_folder


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_a_record_path_in_a_folder_not_writable_is_refused(tmp_path, clean_env):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigurationError, match="cannot be written"):
        create_driver("openai:m", base_url="http://127.0.0.1:9/v1", record=locked / "c.jsonl")


def test_a_cassette_that_fails_to_write_warns_and_keeps_the_answer(tmp_path, clean_env):
    cassette = tmp_path / "gone" / "c.jsonl"
    with StubServer(reply_for(TEXT_STREAM)) as server:
        driver = create_driver("openai:m", base_url=server.url, record=cassette)
        (tmp_path / "gone").write_text("now a file")  # after the check: the write fails
        with pytest.warns(RuntimeWarning, match="could not record to .*the answer is kept"):
            events = collect(driver)
    assert isinstance(events[-1], ModelCompleted) and events[-1].message.text == expected_from(TEXT_STREAM).text
