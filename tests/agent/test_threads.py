"""Conversation threads through the magics (in-process IPython, text view): ``%%agent --thread``,
``%agent threads / history / reset / memory``, history limits, failed runs, structured answers."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from IPython.core.error import UsageError

import ipyagent

from ..support.recordings import expected_from
from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.replies import tool_call_reply

TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # get_weather(city, state)
STRUCTURED = FIXTURES / "openai-chat" / "stream-structured-output-json-schema.sse"  # {"city", "temperature", "units"}
SECRET = "sk-threads-secret-0a1b2c3d4e5f"


@pytest.fixture
def ip(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shared shell, with an OpenAI key whose value no output may show."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return ip


def connect(ip: Any, server: StubServer) -> None:
    ip.run_line_magic("provider", f"openai:gpt-4.1-mini --base-url {server.url}/v1")


def messages(server: StubServer, n: int = -1) -> list[dict[str, Any]]:
    return server.requests[n]["body"]["messages"]


def roles(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in msgs]


def check_calls_have_results(msgs: list[dict[str, Any]]) -> None:
    """Every assistant tool call is followed by its tool result, before the next assistant message."""
    for i, m in enumerate(msgs):
        for call in m.get("tool_calls") or []:
            following = []
            for later in msgs[i + 1:]:
                if later["role"] != "tool":
                    break
                following.append(later["tool_call_id"])
            assert call["id"] in following, (call["id"], msgs)


WEATHER_TOOL = '''
def get_weather(city: str, state: str) -> str:
    """Weather now."""
    return "61 F and foggy in " + city + " " + "x" * SIZE
'''


def test_threads_are_separate_conversations(ip, capsys) -> None:
    text = expected_from(TEXT).text
    with StubServer(Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "--thread a", "first in a")
        ip.run_cell_magic("agent", "--thread b", "first in b")
        ip.run_cell_magic("agent", "--thread a", "second in a")
        ip.run_cell_magic("agent", "", "in the default thread")
    assert messages(server, 1) == [{"role": "user", "content": "first in b"}]
    assert messages(server, 2) == [{"role": "user", "content": "first in a"}, {"role": "assistant", "content": text},
                                   {"role": "user", "content": "second in a"}]
    assert messages(server, 3) == [{"role": "user", "content": "in the default thread"}]
    capsys.readouterr()
    ip.run_line_magic("agent", "threads")
    listing = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(listing) == {"a", "b", "default"}
    assert listing["a"].startswith("a: 2 turns") and listing["b"].startswith("b: 1 turn,")

    ip.run_line_magic("agent", "reset a")
    assert "thread 'a' reset" in capsys.readouterr().out
    with StubServer(Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "--thread a", "again in a")
        ip.run_cell_magic("agent", "--thread b", "second in b")
    assert messages(server, 0) == [{"role": "user", "content": "again in a"}]
    assert roles(messages(server, 1)) == ["user", "assistant", "user"]


def test_history_keeps_tool_calls_and_the_next_prompt_sends_them(ip, capsys) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    text = expected_from(TEXT).text
    ip.user_ns["SIZE"] = 10
    ip.run_cell(WEATHER_TOOL)
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "--thread w --tools get_weather", "Weather in SF?")
        ip.run_cell_magic("agent", "--thread w", "Thanks!")
    follow_up = messages(server, 2)
    assert roles(follow_up) == ["user", "assistant", "tool", "assistant", "user"]
    assert follow_up[1]["tool_calls"][0]["id"] == call["id"]
    assert follow_up[2] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": "61 F and foggy in San Francisco " + "x" * 10,
    }
    capsys.readouterr()
    ip.run_line_magic("agent", "history w")
    out = capsys.readouterr().out
    assert "thread 'w': 2 turns" in out
    # each turn as its transcript (the %%agent cell's renderer), with its prompt
    assert re.search(r"── turn 1 · run \w+\nuser: Weather in SF\?\n", out)
    assert f"\n[tool get_weather({json.dumps(call['input'])}) -> 61 F and foggy in San Francisco" in out
    assert f"\nuser: Thanks!\n{text}\n[openai:gpt-4.1-mini · " in out
    # in a notebook: a header, then each turn as the %%agent cell's bundle (transcript + fallbacks)
    from IPython.utils.capture import capture_output

    from ipyagent.core.transcript import MIME_TYPE

    with capture_output() as captured:
        ip.run_line_magic("agent", "history w")
    header, *turns = captured.outputs
    assert header.data["text/plain"] == "thread 'w': 2 turns"
    assert [set(t.data) for t in turns] == [{MIME_TYPE, "text/html", "text/plain"}] * 2
    assert [t.metadata["ipyagent"]["record"] for t in turns] == ["transcript"] * 2
    first = turns[0].data[MIME_TYPE]
    assert first["show_prompts"] is True and first["title"].startswith("turn 1 · run ")
    assert [m["role"] for m in first["messages"]] == [
        "user",
        "assistant",
        "assistant",
    ]  # tool results sit in their calls
    [card] = [p for m in first["messages"] for p in m["parts"] if p["type"] == "tool_call"]
    assert (card["name"], card["arguments"], card["status"]) == ("get_weather", call["input"], "ok")
    assert card["result"].startswith("61 F and foggy")
    assert first["usage"]["input_tokens"] > 0 and first["timings"]["turns"] == 2
    html = turns[1].data["text/html"]
    assert (
        '<div class="ipyagent-prompt"><div class="ipyagent-meta">user</div><p>Thanks!</p></div>' in html
    )  # on one line
    assert "```" not in html and "{&quot;" not in html.split("ipyagent-prompt")[1].split("ipyagent-footer")[0]
    assert "\nuser: Thanks!\n" in turns[1].data["text/plain"]  # the whole turn: a terminal shows it
    with pytest.raises(UsageError, match="no thread 'nope'"):
        ip.run_line_magic("agent", "history nope")
    with pytest.raises(UsageError, match="use one of: last, threads, history"):
        ip.run_line_magic("agent", "bogus")


def test_max_history_keeps_the_last_turns_and_says_so(ip, capsys) -> None:
    with StubServer(Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        for n in range(3):
            ip.run_cell_magic("agent", "", f"turn {n}")
        capsys.readouterr()
        ip.run_cell_magic("agent", "--max-history 1", "turn 3")
    assert [m["content"] for m in messages(server) if m["role"] == "user"] == ["turn 2", "turn 3"]
    out = capsys.readouterr().out
    assert "[thread 'default': the 2 oldest turns left out of this request (--max-history 1)]" in out


def test_context_window_drops_whole_turns(ip, capsys) -> None:
    ip.user_ns["SIZE"] = 4000  # each turn's tool result is ~1000 tokens by our estimate
    ip.run_cell(WEATHER_TOOL)
    turns = 4
    with StubServer(*[Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)] * turns, Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        for n in range(turns):
            ip.run_cell_magic("agent", "--tools get_weather", f"weather {n}?")
        full = messages(server)  # the last request of the last turn carries all turns before it
        capsys.readouterr()
        ip.run_cell_magic("agent", "--context-window 3000", "And now?")
    sent = messages(server)
    sent_prompts = [m["content"] for m in sent if m["role"] == "user"]
    assert sent_prompts[-1] == "And now?"
    kept = len(sent_prompts) - 1
    assert 1 <= kept < turns  # some turns dropped, some kept
    assert sent_prompts[:-1] == [f"weather {n}?" for n in range(turns - kept, turns)]  # the oldest went first
    assert sent[0]["role"] == "user"  # whole turns: the history starts at a prompt
    check_calls_have_results(sent)
    assert len(json.dumps(sent)) < len(json.dumps(full))
    out = capsys.readouterr().out
    assert f"the {turns - kept} oldest turns left out of this request (the model's context window" in out
    assert "(our estimate)" in out


def test_failed_run_never_poisons_the_next_turn(ip, capsys) -> None:
    exp = expected_from(TEXT)
    cut = Reply.sse_file(TEXT, cut_after=4)  # the connection drops after a few deltas
    with StubServer(Reply.sse_file(TEXT), cut, Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "", "first")
        ip.run_cell_magic("agent", "-o failed", "this one breaks")
        failed = ip.user_ns["failed"]
        assert failed.error is not None and failed.text and failed.text != exp.text
        ip.run_cell_magic("agent", "", "third")
    assert messages(server) == [{"role": "user", "content": "first"}, {"role": "assistant", "content": exp.text},
                                {"role": "user", "content": "third"}]
    capsys.readouterr()
    ip.run_line_magic("agent", "history")
    out = capsys.readouterr().out
    assert "turn 2" in out and "failed" in out and "skipped in the next prompt" in out
    assert f"\n{failed.text}\n[error] " in out and out.count("· failed") == 1
    assert SECRET not in out


def test_structured_answer_in_a_thread_replays(ip, capsys) -> None:
    """Native strategy: the recorded JSON reply; tool strategy: a final_result call. Either
    way the next turn sends the answer back as it was given, with no call left without a result."""
    answer = json.loads(expected_from(STRUCTURED).text)
    ip.run_cell(
        "from pydantic import BaseModel\nclass Weather(BaseModel):\n    city: str\n    temperature: int\n    units: str"
    )
    final_call = tool_call_reply([("call_final_1", "final_result", answer)])
    with StubServer(Reply.sse_file(STRUCTURED), final_call, Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "--thread s --schema Weather -o native", "Weather in SF as JSON")
        ip.run_cell_magic("agent", "--thread s --schema Weather --strategy tool -o tool", "Again, as a tool call")
        native, tool = ip.user_ns["native"], ip.user_ns["tool"]
        ip.run_cell_magic("agent", "--thread s", "Thanks")
    assert native.output.model_dump() == answer and tool.output.model_dump() == answer
    sent = messages(server)
    assert [m["content"] for m in sent if m["role"] == "user"][-1] == "Thanks"
    check_calls_have_results(sent)
    assistant = [m for m in sent if m["role"] == "assistant"]
    assert json.loads(assistant[0]["content"]) == answer  # the native answer, as recorded
    again = next(i for i, m in enumerate(sent) if m.get("content") == "Again, as a tool call")
    replayed = sent[again + 1]  # the tool strategy's answer, as the model gave it
    assert replayed["role"] == "assistant"
    assert (
        json.loads(replayed["content"]) == answer
        or json.loads(replayed["tool_calls"][0]["function"]["arguments"]) == answer
    )
    assert "tools" not in server.requests[-1]["body"] or all(
        t["function"]["name"] != "final_result" for t in server.requests[-1]["body"]["tools"])
    capsys.readouterr()
    ip.run_line_magic("agent", "history s")
    out = capsys.readouterr().out
    assert out.count("── turn") == 3 and "failed" not in out


def test_memory_listing_and_accessor(ip, capsys) -> None:
    [call] = expected_from(TOOL_CALL).tool_calls
    ip.user_ns["SIZE"] = 50_000
    ip.run_cell(
        WEATHER_TOOL
        + "from ipyagent.tools import FunctionTool\nbig_weather = FunctionTool(get_weather, off_prompt=True)\n"
    )
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        connect(ip, server)
        ip.run_cell_magic("agent", "--tools big_weather -o res", "Weather?")
        res = ip.user_ns["res"]
    ref = json.loads(messages(server)[-1]["content"])
    assert "xxxxxxxxxx" not in json.dumps(messages(server))
    namespace = ref["namespace"]
    out = capsys.readouterr().out
    assert f"[stored off-prompt: ipyagent.memory[{namespace!r}], text," in out
    ip.run_line_magic("agent", "memory")
    listing = capsys.readouterr().out
    assert namespace in listing and "from get_weather" in listing and f"call {call['id']}" in listing
    stored = ipyagent.memory[namespace]
    assert stored.value.startswith("61 F and foggy in San Francisco") and len(stored.value) == ref["size"]["chars"]
    assert namespace in list(ipyagent.memory)
    assert res.ok


def test_runs_inspect_replay_and_store_in_the_terminal(ip, capsys, tmp_path) -> None:
    text = expected_from(TEXT).text
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT), Reply.sse_file(TEXT, cut_after=4)) as server:
        connect(ip, server)
        ip.run_cell(WEATHER_TOOL.replace("SIZE", "3"))
        capsys.readouterr()
        ip.run_cell_magic("agent", "--tools get_weather -o ok", "Weather in SF?")
        ok = ip.user_ns["ok"]
        original = capsys.readouterr().out
        ip.run_cell_magic("agent", "-o failed", "this one breaks")
        failed = ip.user_ns["failed"]
        ip.run_cell_magic("agent", "--no-store", "not recorded")
    capsys.readouterr()
    ip.run_line_magic("agent", "runs")
    runs = capsys.readouterr().out.strip().splitlines()
    assert (
        len(runs) == 2 and runs[0].startswith(failed.metadata["run_id"]) and runs[1].startswith(ok.metadata["run_id"])
    )
    assert " failed " in runs[0] and " ok " in runs[1]

    ip.run_line_magic("agent", f"inspect {failed.metadata['run_id'][:8]}")
    inspect = capsys.readouterr().out
    assert inspect.startswith(f"run {failed.metadata['run_id']} · thread 'default' · failed")
    assert "[partial, failed]" in inspect and f"assistant [partial, failed]: {failed.text}" in inspect
    assert f"POST {server.url}/v1/chat/completions" in inspect and '"this one breaks"' in inspect
    assert "response metadata:" in inspect and SECRET not in inspect

    ip.run_line_magic("agent", "replay " + ok.metadata["run_id"])
    replayed = capsys.readouterr().out
    header, *rest = replayed.splitlines()
    assert header.startswith(f"[replay of run {ok.metadata['run_id']} from the run store")
    def body(out: str) -> list[str]:  # footers hold timings
        return [line for line in out.splitlines() if not line.startswith("[openai:")]

    assert body("\n".join(rest)) == body(original) and text in replayed
    assert original.splitlines()[-1].split(" · ")[:2] == replayed.splitlines()[-1].split(" · ")[:2]  # provider, tokens

    ip.run_line_magic("agent", "store off")
    assert capsys.readouterr().out.strip() == "run store: off"
    with pytest.raises(UsageError, match="no run store"):
        ip.run_line_magic("agent", "runs")
    ip.run_line_magic("agent", f"store {tmp_path / 'elsewhere.sqlite'}")
    ip.run_line_magic("agent", "runs")
    assert "no runs stored in" in capsys.readouterr().out
