"""An MCP server's URL-mode elicitation as the views ask it: the card gets the link only when it is
http(s) (never a ``javascript:`` one), and the terminal shows the link and reads done / decline / cancel."""

from __future__ import annotations

import pytest

from ipyagent.core import ElicitationRequest
from ipyagent.notebook.views.asks import elicitation_ask
from ipyagent.notebook.views.terminal_asks import ask_elicitation


@pytest.mark.parametrize("url, shown", [
    ("https://example.com/connect", "https://example.com/connect"),
    ("http://127.0.0.1:8080/cb", "http://127.0.0.1:8080/cb"),
    ("javascript:alert(1)", ""),
    ("data:text/html,<script>x</script>", ""),
])
def test_the_card_offers_only_an_http_link(url: str, shown: str) -> None:
    ask = elicitation_ask(ElicitationRequest(server="ev", message="Connect", url=url, elicitation_id="e1"))
    assert ask["kind"] == "elicitation" and ask["url"] == shown and "fields" not in ask


@pytest.mark.parametrize("typed, action", [("y", "accept"), ("n", "decline"), ("c", "cancel"), ("", "decline")])
def test_the_terminal_shows_the_link_and_reads_the_answer(capsys, typed: str, action: str) -> None:
    request = ElicitationRequest(server="ev", message="Connect \x1b[2Jyour account", url="https://example.com/x")
    answer = ask_elicitation(request, ask=lambda prompt: typed)
    out = capsys.readouterr().out
    assert answer.action == action and answer.content is None
    assert "open https://example.com/x in your browser" in out and "\x1b" not in out
