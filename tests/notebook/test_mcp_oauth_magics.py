"""``%mcp add NAME --url URL --oauth`` in terminal IPython against a local OAuth-protected MCP server
(tests/support/mcp_oauth_server.py): the sign-in link is printed, the test follows it as a browser
would, a model calls the server's tool, and no token is found in what the cell printed, the saved
transcript, ``%mcp log`` or the run store; ``%mcp signout`` deletes the tokens."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx2
import pytest
from IPython.core.error import UsageError

from ..support.mcp_oauth_server import oauth_server
from ..support.replies import tool_call_reply
from ..support.stub_server import StubServer, openai_text_reply


def test_oauth_sign_in_then_a_tool_call_and_no_token_anywhere(shell, capsys, monkeypatch, tmp_path: Path) -> None:
    import ipyagent.notebook.magics.mcp as mcp_magics

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-oauth")
    monkeypatch.setenv("IPYAGENT_MCP_TOKENS", str(tmp_path / "tokens"))
    shown = mcp_magics.show_sign_in
    opened: list[str] = []

    def browser(name: str, link: str) -> None:  # prints the link as the magic does, then "clicks" it
        shown(name, link)
        opened.append(link)
        threading.Thread(target=lambda: httpx2.get(link, follow_redirects=True, timeout=30), daemon=True).start()

    monkeypatch.setattr(mcp_magics, "show_sign_in", browser)
    with oauth_server() as (url, issued):
        shell.run_line_magic("mcp", f"add web --url {url} --oauth --start")
        out = capsys.readouterr().out
        assert out.startswith(f"mcp: sign in to web: open {opened[0]}\n")
        assert "mcp: web running; tools: web_whoami" in out
        with StubServer(tool_call_reply([("call_w", "web_whoami", {})]), openai_text_reply("You are in.")) as model:
            shell.run_line_magic("provider", f"openai:m --base-url {model.url}/v1")
            shell.run_cell_magic("agent", "--tools web -o res", "Who am I?")
        printed = capsys.readouterr().out
        [tool] = [m for m in model.requests[1]["body"]["messages"] if m["role"] == "tool"]
        assert tool["content"] == "signed in to the protected server"
        shell.run_line_magic("mcp", "list")
        shell.run_line_magic("mcp", "log web -n 500")
        listed = capsys.readouterr().out
        assert listed.startswith("web  running, oauth  ")
    assert issued.tokens and issued.calls
    res = shell.user_ns["res"]
    store = Path(os.environ["IPYAGENT_RUN_STORE"]).read_bytes()
    for token in issued.tokens:
        assert token not in printed + listed + repr(res.messages) + str(model.requests)
        assert token.encode() not in store
    shell.run_line_magic("mcp", "signout web")
    signed_out = "mcp: signed out of web; its tokens are deleted (the next use signs in again)"
    assert capsys.readouterr().out.strip() == signed_out
    assert list((tmp_path / "tokens").iterdir()) == []


@pytest.mark.parametrize("line, expected", [
    ("add x --oauth -- true", "--oauth goes with --url"),
    ("add x --url http://127.0.0.1:9/sse --transport sse --oauth", "--oauth goes with streamable HTTP"),
])
def test_oauth_goes_with_a_streamable_http_url(shell, line: str, expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        shell.run_line_magic("mcp", line)


def test_signout_needs_an_oauth_server(shell) -> None:
    shell.run_line_magic("mcp", "add web --url http://127.0.0.1:9/mcp")
    with pytest.raises(UsageError, match="web was not added with --oauth"):
        shell.run_line_magic("mcp", "signout web")
