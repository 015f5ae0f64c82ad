"""The ReAct text protocol: parsing model text robustly, and runs over real HTTP."""

from __future__ import annotations

import pytest

from ipyagent import Agent
from ipyagent.agent import react
from ipyagent.core import ToolDefinition

from .stub_server import StubServer, openai_text_reply

CALL = '<tool_call id="c1">\n{"name": "add", "input": {"a": 2, "b": 3}}\n</tool_call>'


def test_prose_brackets_and_json_after_the_block_do_not_break_parsing():
    text = f"Let me add. {CALL}\nThen I'll compare with [1, 2] and {{\"x\": 1}} ] }} afterwards."
    (call,) = react.parse_calls(text)
    assert call.error is None
    assert (call.tag, call.action.native_name, call.action.input) == ("c1", "add", {"a": 2, "b": 3})


def test_fenced_json_several_calls_and_missing_ids():
    text = '<tool_call>\n```json\n{"name": "add", "input": {"a": 1}}\n```\n</tool_call> and <tool_call id=c9>{"name": "Clock_now", "input": {}}</tool_call>'
    first, second = react.parse_calls(text)
    assert first.tag == "react-1" and first.action.input == {"a": 1}
    assert second.tag == "c9" and second.action.native_name == "Clock_now"


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('{"name": "add", "input": {"a": 1,}}', "not valid JSON"),
        ("call add please", "no JSON object"),
        ('{"input": {}}', '"name"'),
        ('{"name": "add", "input": [1, 2]}', '"input" must be a JSON object'),
    ],
)
def test_bad_blocks_become_errors_for_the_model(body, fragment):
    (call,) = react.parse_calls(f'<tool_call id="k">{body}</tool_call>')
    assert call.action is None and call.tag == "k"
    assert fragment in call.error


def test_unterminated_last_block_is_read():
    (call,) = react.parse_calls('<tool_call id="z">{"name": "add", "input": {"a": 1}}')
    assert call.action.input == {"a": 1}


def test_system_prompt_lists_tools_with_schemas():
    prompt = react.system_prompt([ToolDefinition(name="add", description="Add two numbers",
                                                 parameters={"type": "object", "properties": {"a": {"type": "integer"}}})])
    assert "<tool_call" in prompt and "add: Add two numbers" in prompt and '"a": {"type": "integer"}' in prompt


def test_the_prompt_teaches_the_format_the_parser_reads_and_the_results_use():
    prompt = react.system_prompt([ToolDefinition(name="add", description="", parameters={"type": "object"})])
    (call,) = react.parse_calls(prompt)  # the example block the model is shown is one call, read as such
    assert (call.tag, call.action.native_name, call.action.input, call.error) == ("c1", "TOOL_NAME", {"argument": "value"}, None)
    assert '<tool_result id="c1">...</tool_result>' in prompt  # what result_block writes for that id
    assert react.result_block("c1", "...") == '<tool_result id="c1">\n...\n</tool_result>'
    assert prompt.endswith('- add: no description; input: {"type": "object"}')


def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


def test_react_run_over_http_ties_results_by_id(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    first = (f'I will use tools. <tool_call id="b">{{"name": "add", "input": {{"a": "4", "b": 5}}}}</tool_call> '
             '<tool_call id="a">{"name": "nope", "input": {}}</tool_call> <tool_call id="c">{"name": "add", "input": {"b": 1}}</tool_call>'
             ' <tool_call id="d">{"name": "add", "input": {"a": 1,,}}</tool_call> and [brackets] after.')
    with StubServer(openai_text_reply(first), openai_text_reply("The sum is 9.")) as server:
        agent = Agent("openai:m", base_url=server.url, tools=[add], react=True)
        events = []
        result = agent.run("What is 4 + 5?", on_event=events.append)
    assert result.ok and result.text == "The sum is 9."
    first_request, second_request = (r["body"] for r in server.requests)
    assert "tools" not in first_request  # no native tools in ReAct mode
    assert first_request["messages"][0]["role"] == "system" and "<tool_call" in first_request["messages"][0]["content"]
    observation = second_request["messages"][-1]
    assert observation["role"] == "user"
    blocks = dict(
        (b.split('"')[1], b) for b in observation["content"].split("\n\n")
    )
    assert set(blocks) == {"a", "b", "c", "d"}
    assert blocks["b"].splitlines()[1] == "9"  # "4" coerced to 4, then run
    assert 'error="true"' in blocks["a"] and "available: add" in blocks["a"]
    assert 'error="true"' in blocks["c"] and "Field required" in blocks["c"]
    assert 'error="true"' in blocks["d"] and "not valid JSON" in blocks["d"]
    completed = [e for e in events if e.type == "tool_call_completed"]
    assert [e.action.tag for e in completed] == ["b", "a", "c", "d"]


def test_react_is_used_when_the_driver_has_no_native_tools(monkeypatch):
    from ipyagent.drivers import Capabilities
    from ipyagent.drivers.openai_chat import OpenAIChatPromptDriver

    class NoTools(OpenAIChatPromptDriver):
        capabilities = Capabilities(tools=False)

    with StubServer(openai_text_reply(CALL), openai_text_reply("5")) as server:
        agent = Agent(NoTools("m", base_url=server.url), tools=[add])
        result = agent.run("2+3?")
    assert result.ok and result.text == "5"
    assert "tools" not in server.requests[0]["body"]
    assert server.requests[1]["body"]["messages"][-1]["content"] == '<tool_result id="c1">\n5\n</tool_result>'
