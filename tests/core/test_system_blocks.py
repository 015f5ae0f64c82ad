"""System blocks: static ones always sent, dynamic ones dropped by priority to fit the budget;
each driver's own system field (the body a local server receives); `%agent inspect` lists them."""

from __future__ import annotations

import pytest

import ipyagent
from ipyagent.core import PromptStack, SystemBlock, fit_system_blocks, system_blocks, system_text

from ..support.stub_server import StubServer
from ..support.replies import MODELS, PROTOCOLS, REPLIES

RULES = SystemBlock(text="You are terse.", source="user")  # static
NOTES = SystemBlock(text="Notes: " + "n" * 400, source="memory", priority=1, dynamic=True)  # ~102 tokens
DATA = SystemBlock(text="Data: " + "d" * 200, source="context", priority=5, dynamic=True)  # ~52 tokens


def test_token_counts_are_our_estimate_unless_given():
    assert RULES.token_count == 4 and SystemBlock(text="x" * 10, token_count=99).token_count == 99


@pytest.mark.parametrize("budget, kept", [
    (None, ["user", "memory", "context"]),
    (1000, ["user", "memory", "context"]),
    (100, ["user", "context"]),  # the lowest priority goes first
    (50, ["user"]),
    (0, ["user"]),  # static blocks stay, even past the budget
])
def test_dynamic_blocks_are_dropped_lowest_priority_first(budget, kept):
    chosen, dropped = fit_system_blocks([RULES, NOTES, DATA], budget)
    assert [b.source for b in chosen] == kept
    assert {b.source for b in dropped} == {"user", "memory", "context"} - set(kept)


def test_equal_priorities_drop_the_later_block_first():
    a, b = (SystemBlock(text="x" * 40, source=s, dynamic=True) for s in ("a", "b"))
    assert [x.source for x in fit_system_blocks([a, b], 15)[0]] == ["a"]


def _body(provider: str, **agent_options) -> dict:
    with StubServer(REPLIES[PROTOCOLS.get(provider, provider)]()) as server:
        agent = ipyagent.Agent(f"{provider}:{MODELS[provider]}", base_url=server.url, **agent_options)
        result = agent.run("Hello")
    assert result.ok, result.error
    assert [b["kept"] for b in result.metadata["system_blocks"]] == [True, True, False]
    return server.requests[0]["body"]


BLOCKS = {"system": [RULES, NOTES, DATA], "system_budget": 100}


def test_openai_chat_sends_one_system_message():
    body = _body("openai", **BLOCKS)
    assert body["messages"][0] == {"role": "system", "content": f"{RULES.text}\n\n{DATA.text}"}
    assert body["messages"][1]["role"] == "user"


def test_ollama_sends_one_system_message():
    assert _body("ollama", **BLOCKS)["messages"][0] == {"role": "system", "content": f"{RULES.text}\n\n{DATA.text}"}


def test_responses_sends_the_blocks_as_instructions():
    assert _body("openai-responses", **BLOCKS)["instructions"] == f"{RULES.text}\n\n{DATA.text}"


def test_anthropic_sends_a_list_of_text_blocks():
    assert _body("anthropic", **BLOCKS)["system"] == [
        {"type": "text", "text": RULES.text},
        {"type": "text", "text": DATA.text},
    ]


def test_gemini_sends_one_part_per_block():
    assert _body("gemini", **BLOCKS)["systemInstruction"] == {"parts": [{"text": RULES.text}, {"text": DATA.text}]}


def test_inspect_shows_which_blocks_went_in(ip, capsys, tmp_path):
    with StubServer(REPLIES["openai"]()) as server:
        ip.run_line_magic("agent", f"store {tmp_path / 'runs.sqlite'}")
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["blocks"] = [RULES, NOTES, DATA]
        ip.run_cell_magic("agent", "--system blocks --system-budget 100", "Hello")
        capsys.readouterr()
        ip.run_line_magic("agent", "inspect")
    out = capsys.readouterr().out
    assert "system blocks: 2 sent, ≈56 tokens (estimate); 1 dropped to fit the budget" in out
    assert "dropped  memory  priority 1  dynamic" in out and "sent     context  priority 5  dynamic" in out
    assert server.requests[0]["body"]["messages"][0]["content"] == f"{RULES.text}\n\n{DATA.text}"


def test_system_text_blocks_or_a_list_of_either_become_blocks_and_empty_text_none() -> None:
    block = SystemBlock(text="be brief", source="react", dynamic=True)
    assert system_blocks(None) == [] and system_blocks("") == [] and system_blocks([]) == []
    assert system_blocks("hi") == [SystemBlock(text="hi", source="user")]
    assert system_blocks("hi", source="memory") == [SystemBlock(text="hi", source="memory")]
    assert system_blocks(block) == [block]
    assert system_blocks(["a", "", block]) == [SystemBlock(text="a"), block]
    with pytest.raises(TypeError, match="^system takes text or SystemBlock objects, not int$"):
        system_blocks(["a", 3])


def test_a_block_counts_its_tokens_unless_told_and_summarizes_without_its_text() -> None:
    assert SystemBlock(text="x" * 9).token_count == 3 and SystemBlock(text="").token_count == 0
    assert SystemBlock(text="x" * 9, token_count=7).token_count == 7
    block = SystemBlock(text="secret-ish", source="memory", priority=2, dynamic=True, metadata={"id": 1})
    assert block.summary(kept=False) == {"source": "memory", "priority": 2, "dynamic": True, "token_count": 3,
                                         "kept": False, "metadata": {"id": 1}}
    assert "metadata" not in SystemBlock(text="a").summary(kept=True)


def test_blocks_that_fill_the_budget_exactly_all_stay() -> None:
    a, b = (SystemBlock(text="x" * 40, source=s, dynamic=True) for s in ("a", "b"))
    assert fit_system_blocks([a, b], 20) == ([a, b], [])
    assert fit_system_blocks([a, b], 19) == ([a], [b])


def test_the_system_text_is_every_block_s_text_a_blank_line_apart() -> None:
    assert system_text(["one", SystemBlock(text="two", dynamic=True), ""]) == "one\n\ntwo"
    assert system_text("only") == "only" and system_text(None) == ""


def test_the_system_texts_are_the_blocks_then_the_system_messages_with_text() -> None:
    stack = PromptStack(system_blocks=[RULES, SystemBlock(text="", source="memory")])
    stack.add_system_message("Answer in French.")
    stack.add_user_message("hi")
    stack.add_system_message("")
    assert stack.system_texts() == ["You are terse.", "Answer in French."]
