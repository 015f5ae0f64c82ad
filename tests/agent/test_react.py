"""The ReAct text protocol: parsing model text robustly, and runs over real HTTP."""

from __future__ import annotations

import json

import pytest

from ipyagent import Agent
from ipyagent.agent import react
from ipyagent.core import ToolDefinition

from ..support.stub_server import StubServer, openai_text_reply

CALL = '<tool_call id="c1">\n{"name": "add", "input": {"a": 2, "b": 3}}\n</tool_call>'


def test_prose_brackets_and_json_after_the_block_do_not_break_parsing():
    text = f"Let me add. {CALL}\nThen I'll compare with [1, 2] and {{\"x\": 1}} ] }} afterwards."
    (call,) = react.parse_calls(text)
    assert call.error is None
    assert (call.tag, call.action.native_name, call.action.input) == ("c1", "add", {"a": 2, "b": 3})


def test_fenced_json_several_calls_and_missing_ids():
    text = (
        '<tool_call>\n```json\n{"name": "add", "input": {"a": 1}}\n```\n</tool_call> and <tool_call id=c9>{"name": '
        '"Clock_now", "input": {}}</tool_call>'
    )
    first, second = react.parse_calls(text)
    assert first.tag == "react-1" and first.action.input == {"a": 1}
    assert second.tag == "c9" and second.action.native_name == "Clock_now"


@pytest.mark.parametrize(
    "body, error",
    [
        ("call add please", 'the tool_call block holds no JSON object; write {"name": ..., "input": {...}}'),
        ("", 'the tool_call block holds no JSON object; write {"name": ..., "input": {...}}'),
        ('{"input": {}}', 'the tool_call JSON needs a "name" string'),
        ('{"name": "", "input": {}}', 'the tool_call JSON needs a "name" string'),
        ('{"name": 5, "input": {}}', 'the tool_call JSON needs a "name" string'),
        ('{"name": "add", "input": [1, 2]}', 'the tool_call "input" must be a JSON object'),
        ('{"name": "add", "input": null}', 'the tool_call "input" must be a JSON object'),
    ],
)
def test_bad_blocks_become_errors_for_the_model(body, error):
    (call,) = react.parse_calls(f'<tool_call id="k">{body}</tool_call>')
    assert (call.tag, call.action, call.error) == ("k", None, error)


def test_a_bad_block_does_not_stop_the_blocks_after_it():
    calls = react.parse_calls('<tool_call id="a">no object</tool_call> <tool_call id="b">{"name": 1,}</tool_call> '
                              '<tool_call id="c">{"name": "add", "input": {"a": 1}}</tool_call>')
    assert [(c.tag, c.action is None, c.error is None) for c in calls] == [
        ("a", True, False),
        ("b", True, False),
        ("c", False, True),
    ]


def test_invalid_json_says_where_counted_from_the_object():
    """The position is the one the object alone would give, wherever the block puts it; the
    words and the position are Python's `json` (3.13 words a trailing comma otherwise)."""
    bad = '{"name": "add", "input": {"a": 1,}}'
    with pytest.raises(json.JSONDecodeError) as alone:
        json.loads(bad)
    for block in (bad, f"\n```json\n{bad}\n```\n", f"I will add them: {bad}"):
        (call,) = react.parse_calls(f'<tool_call id="k">{block}</tool_call>')
        assert call.error == (f"the tool_call block is not valid JSON ({alone.value.msg} "
                              f"at character {alone.value.pos} of the object); nothing was run")


def test_input_defaults_to_empty_and_arguments_is_read_too():
    no_input, arguments, both = react.parse_calls(
        '<tool_call>{"name": "Clock_now"}</tool_call><tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
        '<tool_call>{"name": "add", "input": {"a": 2}, "arguments": {"a": 3}}</tool_call>')
    assert [(c.tag, c.action.input) for c in (no_input, arguments, both)] == [
        ("react-1", {}),
        ("react-2", {"a": 1}),
        ("react-3", {"a": 2}),
    ]


def test_a_block_without_id_is_numbered_by_its_place_among_all_blocks():
    first, second = react.parse_calls(
        '<tool_call id="x">{"name": "a"}</tool_call> <tool_call>{"name": "b"}</tool_call>'
    )
    assert (first.tag, second.tag) == ("x", "react-2")


def test_unterminated_last_block_is_read():
    (call,) = react.parse_calls('<tool_call id="z">{"name": "add", "input": {"a": 1}}')
    assert call.action.input == {"a": 1}


# The prompt is the protocol's contract with the model: every line is pinned, so a change to
# what the model is told is made on purpose, here.
PROMPT = """You can use tools. To call one, write a block like this, with one JSON object inside:

<tool_call id="c1">
{"name": "TOOL_NAME", "input": {"argument": "value"}}
</tool_call>

Give each call a new id. You may write several blocks for independent calls, then stop and wait:
each result comes back as <tool_result id="c1">...</tool_result>. When you have the answer,
reply without any tool_call block.

Tools (name: description; input JSON Schema):
- add: Add two numbers; input: {"type": "object", "properties": {"a": {"type": "integer"}}}
- Clock_now: no description; input: {}"""


def test_system_prompt_states_the_protocol_and_lists_tools_with_schemas():
    prompt = react.system_prompt(
        [
            ToolDefinition(
                name="add",
                description="Add two numbers",
                parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
            ),
            ToolDefinition(name="Clock_now", description="", parameters={}),
        ]
    )
    assert prompt == PROMPT


def test_the_prompt_teaches_the_format_the_parser_reads_and_the_results_use():
    prompt = react.system_prompt([ToolDefinition(name="add", description="", parameters={"type": "object"})])
    (call,) = react.parse_calls(prompt)  # the example block the model is shown is one call, read as such
    assert (call.tag, call.action.native_name, call.action.input, call.error) == (
        "c1",
        "TOOL_NAME",
        {"argument": "value"},
        None,
    )
    assert '<tool_result id="c1">...</tool_result>' in prompt  # what result_block writes for that id
    assert react.result_block("c1", "...") == '<tool_result id="c1">\n...\n</tool_result>'
    assert react.result_block("c2", "boom", is_error=True) == '<tool_result id="c2" error="true">\nboom\n</tool_result>'


def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


def test_react_run_over_http_ties_results_by_id(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    first = (
        f'I will use tools. <tool_call id="b">{{"name": "add", "input": {{"a": "4", "b": 5}}}}</tool_call> '
        '<tool_call id="a">{"name": "nope", "input": {}}</tool_call> <tool_call id="c">{"name": "add", "input": {"b": '
        '1}}</tool_call>'
        ' <tool_call id="d">{"name": "add", "input": {"a": 1,,}}</tool_call> and [brackets] after.'
    )
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
    from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver

    class NoTools(OpenAIChatPromptDriver):
        capabilities = Capabilities(tools=False)

    with StubServer(openai_text_reply(CALL), openai_text_reply("5")) as server:
        agent = Agent(NoTools("m", base_url=server.url), tools=[add])
        result = agent.run("2+3?")
    assert result.ok and result.text == "5"
    assert "tools" not in server.requests[0]["body"]
    assert server.requests[1]["body"]["messages"][-1]["content"] == '<tool_result id="c1">\n5\n</tool_result>'
