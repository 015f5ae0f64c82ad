"""OAuth sign-in to a remote MCP server (MCP "Authorization") through the SDK's OAuth client, against
a local OAuth-protected streamable-HTTP server built with the SDK's auth helpers
(tests/support/mcp_oauth_server.py): discovery, dynamic registration, PKCE, the loopback redirect,
tokens in a 0600 file outside the notebook, reused, refreshed once expired, never logged."""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import httpx2
import pytest

from ipyagent.agent import run_sync
from ipyagent.core import redact
from ipyagent.tools import MCPServer, MCPServerError, TokenFile

from ..support.mcp_oauth_server import oauth_server


@pytest.fixture
def tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tokens"
    monkeypatch.setenv("IPYAGENT_MCP_TOKENS", str(folder))
    return folder


class Browser:
    """Stands for the user's browser: opens each sign-in link (in a thread, as a browser would) and
    follows the authorization server's redirect back to ipyagent's listener."""

    def __init__(self) -> None:
        self.links: list[str] = []
        self.pages: list[str] = []

    def __call__(self, link: str) -> None:
        self.links.append(link)

        def visit() -> None:
            self.pages.append(httpx2.get(link, follow_redirects=True, timeout=30).text)

        threading.Thread(target=visit, daemon=True).start()


def test_sign_in_stores_tokens_0600_reuses_and_refreshes_them(tokens: Path) -> None:
    browser = Browser()
    with oauth_server() as (url, issued):
        web = MCPServer("web", url=url, oauth=True, on_sign_in=browser)
        try:
            assert run_sync(web.call("whoami", {})).to_text() == "signed in to the protected server"
        finally:
            run_sync(web.aclose())
        [link] = browser.links
        assert link.startswith(url.removesuffix("/mcp") + "/authorize?") and "code_challenge_method=S256" in link
        assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in link
        assert browser.pages == ["Signed in: you can close this tab and go back to the notebook."]
        assert issued.grants == ["authorization_code"] and len(issued.clients) == 1
        [file] = list(tokens.iterdir())
        assert stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_IMODE(tokens.stat().st_mode) == 0o700
        stored = json.loads(file.read_text())
        assert stored["tokens"]["access_token"] == issued.tokens[0] and stored["url"] == url

        again = MCPServer("web", url=url, oauth=True, on_sign_in=browser)  # a new kernel: the stored token
        try:
            run_sync(again.call("whoami", {}))
        finally:
            run_sync(again.aclose())
        assert len(browser.links) == 1 and issued.grants == ["authorization_code"]

        stored["expires_at"] = 1  # as if the access token's hour had passed
        file.write_text(json.dumps(stored))
        later = MCPServer("web", url=url, oauth=True, on_sign_in=browser)
        try:
            run_sync(later.call("whoami", {}))
            log = later.log(500)
        finally:
            run_sync(later.aclose())
        assert issued.grants == ["authorization_code", "refresh_token"] and len(browser.links) == 1
        assert json.loads(file.read_text())["tokens"]["access_token"] == issued.tokens[-2]  # the new one, kept
        assert issued.calls[-1] == issued.tokens[-2]
    assert all(redact(t) == "[redacted]" for t in issued.tokens)  # the one redactor knows every token
    assert not any(t in log for t in issued.tokens)


def test_a_sign_in_nobody_finishes_is_one_line(tokens: Path) -> None:
    with oauth_server() as (url, issued):
        web = MCPServer("web", url=url, oauth=True, on_sign_in=lambda link: None)
        web.sign_in_timeout = 0.5  # nobody opens the link
        try:
            with pytest.raises(MCPServerError) as caught:
                run_sync(web.start())
        finally:
            run_sync(web.aclose())
    assert str(caught.value).startswith("MCP server 'web' ") and "no sign-in within 0.5 s" in str(caught.value)
    assert "\n" not in str(caught.value) and issued.tokens == []


def test_oauth_goes_with_a_streamable_http_url() -> None:
    with pytest.raises(ValueError, match="oauth=True goes with a URL over streamable HTTP"):
        MCPServer("x", command=["true"], oauth=True)
    with pytest.raises(ValueError, match="oauth=True goes with a URL over streamable HTTP"):
        MCPServer("x", url="http://127.0.0.1:9/sse", transport="sse", oauth=True)


def test_token_file_is_keyed_by_url_and_forgets(tokens: Path) -> None:
    a, b = TokenFile("https://a.example/mcp"), TokenFile("https://b.example/mcp")
    assert a.path != b.path and a.path.parent == tokens
    port = a.redirect_port()
    assert TokenFile("https://a.example/mcp").redirect_port() == port  # kept for the registration
    with __import__("socket").socket() as busy:  # another program took the port: register again with a new one
        busy.bind(("127.0.0.1", port))
        busy.listen()
        a.data["client_info"] = {"client_id": "old"}
        assert a.redirect_port() != port and "client_info" not in a.data
    a.forget()
    assert not a.path.exists()
