"""Tools in real kernels: notebooks/tools.ipynb under nbclient, and approval clicked through comm messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipyagent import Agent
from ipyagent.tools import activity

from ..support.kernels import transcript_of, view_html, wait_reply
from ..support.stub_server import FIXTURES, Reply, StubServer

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
TOOLS_NB = ROOT / "notebooks" / "tools.ipynb"
CASSETTE = ROOT / "notebooks" / "tools.cassette.jsonl"
TOOL_CALL = FIXTURES / "openai-chat" / "stream-tool-call-single-fragmented.sse"  # calls get_weather(city, state)
TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


def test_tools_notebook_shows_tool_cards_with_results(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    exchanges = [json.loads(line) for line in CASSETTE.read_text().splitlines() if line.strip()]
    replies = [
        Reply(pieces=[p.encode() + b"\n\n" for p in e["response"]["body"].split("\n\n") if p]) for e in exchanges
    ]
    with StubServer(*replies) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-tools")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        nb = nbformat.read(TOOLS_NB, as_version=4)
        NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(TOOLS_NB.parent)}}).execute()

    # Each later request carries the tool results, tied to the recorded call ids.
    assert len(server.requests) == len(exchanges)
    calls_made = {}
    for exchange in exchanges:
        for line in exchange["response"]["body"].splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    for call in choice["delta"].get("tool_calls") or []:
                        if call.get("id"):
                            calls_made[call["id"]] = call["function"]["name"]
    tool_messages = {
        m["tool_call_id"]: m["content"] for r in server.requests for m in r["body"]["messages"] if m["role"] == "tool"
    }
    assert set(tool_messages) == set(calls_made)
    by_name = {calls_made[i]: content for i, content in tool_messages.items()}
    assert by_name == {"Clock_days_between": "358", "word_count": "9", "Calculator_evaluate": "8592"}

    (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%agent")]
    body, footer = view_html(nb, cell)
    calls = [p for m in transcript_of(cell)["messages"] for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["Clock_days_between", "word_count", "Calculator_evaluate"]
    assert [(c["status"], c["result"]) for c in calls] == [("ok", "358"), ("ok", "9"), ("ok", "8592")]
    assert "3 model turns" in footer and "replayed" not in footer
    listing = [c for c in nb.cells if c.source == "%tools"][0].outputs[0]["data"]["text/plain"]
    assert "Calculator_evaluate" in listing and "word_count" in listing and '"expression"' in listing


APPROVAL_TOOL = '''
from ipyagent.tools import activity
ran = []

@activity(config={"requires_approval": True})
def get_weather(city: str, state: str = "") -> str:
    """Weather now."""
    ran.append(city)
    return "61 F and sunny"
'''


def _comm_messages(kc):
    """The kernel's comm_open / comm_msg messages as they come, as (type, content, data). It waits
    on the kernel's messages as long as they take (pytest's per-test timeout is the guard), never
    on the clock; a cell that ends first fails the test."""
    while True:
        msg = kc.get_iopub_msg()
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            yield msg["msg_type"], msg["content"], msg["content"].get("data", {})
        assert not (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
                    and msg["parent_header"].get("msg_type") == "execute_request"), "the cell ended before it asked"


def _send_custom(kc, comm_id: str, content: dict) -> None:
    """A custom widget message to comm `comm_id`, as a front end sends it."""
    kc.shell_channel.send(
        kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}})
    )


def _click_when_shown(kc, label: str) -> str:
    """Wait until the approval row holding button `label` is shown, click the button through
    a comm message (as the front end does), and return its comm id.

    The row is shown (its ``ipyagent-approval`` class set) after the click handlers are
    attached, as a person would see it; clicking on the button's creation could race them.
    """
    comm_id = None
    for kind, content, data in _comm_messages(kc):
        state = data.get("state", {})
        if kind == "comm_open" and state.get("_model_name") == "ButtonModel" and state.get("description") == label:
            comm_id = content["comm_id"]
        elif comm_id and "ipyagent-approval" in state.get("_dom_classes", []):
            _send_custom(kc, comm_id, {"event": "click"})
            return comm_id
    raise AssertionError("unreachable")


def _answer_in_live_view(kc, verdict: bool) -> dict:
    """Say hello to the live view's widget as its front end does (live.ts), wait for the
    question in a tool call's card, answer it with `verdict`, and return the question."""
    comm_id = None
    for kind, content, data in _comm_messages(kc):
        if kind == "comm_open" and "ipyagent-view" in data.get("state", {}).get("_dom_classes", []):
            comm_id = content["comm_id"]
            _send_custom(kc, comm_id, {"type": "hello"})
        elif comm_id and content.get("comm_id") == comm_id and data.get("method") == "custom":
            sent = data["content"]
            for op in sent.get("ops") or sent.get("doc", {}).get("ops") or []:
                if op[0] == "ask" and op[2]:
                    _send_custom(kc, comm_id, {"type": "approve", "request": op[2]["request"], "verdict": verdict})
                    return op[2]
    raise AssertionError("unreachable")


@pytest.mark.parametrize("label, runs", [("Approve", True), ("Deny", False)])
@pytest.mark.parametrize("style", ["magic", "await"])
def test_approval_buttons_work_while_the_cell_runs(monkeypatch, label, runs, style):
    from jupyter_client.manager import start_new_kernel

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-approval")
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            setup = f"%load_ext ipyagent\n%provider openai:gpt-4.1-mini --base-url {server.url}/v1\n{APPROVAL_TOOL}"
            reply, _ = wait_reply(kc, kc.execute(setup))
            assert reply["content"]["status"] == "ok", reply["content"]
            if style == "magic":
                code = "%%agent --tools get_weather -o res\nWeather in San Francisco?"
            else:
                code = (
                    "from ipyagent import Agent\nfrom ipyagent.notebook import ApprovalButtons\n"
                    f"agent = Agent('openai:gpt-4.1-mini', base_url='{server.url}/v1', tools=[get_weather], "
                    "approve=ApprovalButtons())\n"
                    "res = await agent.arun('Weather in San Francisco?')"
                )
            msg_id = kc.execute(code)
            if style == "magic":  # Approve / Deny are in the live view's card
                asked = _answer_in_live_view(kc, runs)
                assert asked["name"] == "get_weather" and asked["arguments"] == {"city": "San Francisco", "state": "CA"}
            else:
                _click_when_shown(kc, label)
            reply, cell_iopub = wait_reply(kc, msg_id)
            assert reply["content"]["status"] == "ok", reply["content"]
            if style == "magic":  # the saved output says what the user decided
                (saved,) = [m["content"]["data"] for m in cell_iopub if m["msg_type"] == "update_display_data"]
                (call,) = [p for m in saved["application/vnd.ipyagent.transcript+json"]["messages"]
                           for p in m["parts"] if p["type"] == "tool_call"]
                assert call["approval"] == ("approved" if runs else "denied")
                assert ("· approved by you · done in" if runs else "· denied]") in saved["text/plain"]
            reply, iopub = wait_reply(kc, kc.execute("print(ran, res.ok, res.tool_calls[0].output.to_text())"))
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    tool_result = server.requests[1]["body"]["messages"][-1]
    assert tool_result["role"] == "tool"
    if runs:
        assert out.strip() == "['San Francisco'] True 61 F and sunny"
        assert tool_result["content"] == "61 F and sunny"
    else:
        assert out.startswith("[] True denied by the user")
        assert tool_result["content"].startswith("denied by the user")




@pytest.mark.parametrize("verdict", [True, False])
def test_approval_callback_outside_notebooks(monkeypatch, verdict):
    """The recorded call is `get_weather`; a FunctionTool-free BaseTool with a plain name serves it."""

    @activity
    def get_weather(city: str, state: str = "") -> str:
        """Weather now."""
        seen.append(city)
        return "61 F"

    seen: list[str] = []
    asked = []
    from ipyagent.tools import FunctionTool

    tool = FunctionTool(get_weather, requires_approval=True)
    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        agent = Agent(
            "openai:m", base_url=server.url, tools=[tool], approve=lambda action: asked.append(action.input) or verdict
        )
        result = agent.run("Weather?")
    assert result.ok and asked == [{"city": "San Francisco", "state": "CA"}]
    assert seen == (["San Francisco"] if verdict else [])
    content = server.requests[1]["body"]["messages"][-1]["content"]
    assert (content == "61 F") if verdict else content.startswith("denied by the user")


def test_no_approver_means_not_run(monkeypatch):
    from ipyagent.tools import FunctionTool

    def get_weather(city: str) -> str:
        raise AssertionError("must not run")

    with StubServer(Reply.sse_file(TOOL_CALL), Reply.sse_file(TEXT)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        result = Agent("openai:m", base_url=server.url, tools=[FunctionTool(get_weather, requires_approval=True)]).run(
            "Weather?"
        )
    assert result.ok
    assert "no one can approve" in server.requests[1]["body"]["messages"][-1]["content"]
