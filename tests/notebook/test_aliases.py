"""A provider named by an alias (``%provider --alias small openai:gpt-4.1-nano``) is shown by it
in every table Python draws, the full id beside it: the saved comparison's and evaluation's
HTML, Markdown and text fallbacks."""

from __future__ import annotations

from ipyagent.agent import EvalResult, Evaluation
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.core import ComparisonRecord, ComparisonTable, Transcript, footer_figures
from ipyagent.notebook.render.evaluation import column_title, evaluation_html, evaluation_markdown, evaluation_text
from ipyagent.notebook.render.evaluation_stats import id_parts
from ipyagent.notebook.render.transcript import comparison_to_html
from ipyagent.notebook.views.compare_view import with_titles

from ..support.stub_server import StubServer, openai_text_reply


def test_a_provider_row_is_named_by_its_alias_and_a_run_row_is_not() -> None:
    rows = [["openai:gpt-4.1-nano · median (min–max) of 2 runs", "0.5"], ["run 1", "0.4"], ["openai:m", "0.6"]]
    named = with_titles(rows, [[0, None], [0, 0], [1, None]], ["small", "openai:m"])
    assert [r[0] for r in named] == ["small · openai:gpt-4.1-nano · median (min–max) of 2 runs", "run 1",
                                     "openai:m"]
    assert with_titles(rows, [], ["small"]) == rows  # an older record, without row keys: as saved


def test_the_saved_comparison_table_names_the_alias() -> None:
    table = ComparisonTable(columns=["provider:model", "total (s)", "error"], rows=[["openai:gpt-4.1-nano", "0.5", ""]],
                            row_runs=[[0, None]])
    record = ComparisonRecord(providers=["openai:gpt-4.1-nano"], table=table, titles=["small"])
    assert "<td>small · openai:gpt-4.1-nano</td>" in comparison_to_html(record)


def test_the_evaluation_fallbacks_name_the_alias_then_the_id() -> None:
    ev = Evaluation(["openai:a", "openrouter:meta/llama"], [{"q": "x"}], assertions=["contains:x"], variants=["v"],
                    labels={"openai:a": "good", "openrouter:meta/llama": "ll"})
    ev.results = [EvalResult(row=0, provider=p, prompt="x", fields={"q": "x"}, variant="v", text="x", passed=True,
                             outcomes=[Outcome("contains:x", True)], status="ok") for p in ev.providers]
    doc = ev.to_json()
    assert column_title(doc, "openai:a/v") == "good/v (openai:a/v)"
    assert column_title(doc, "openrouter:meta/llama/v") == "ll/v (openrouter:meta/llama/v)"  # a '/' in the model
    assert column_title({"providers": ["openai:a"]}, "openai:a") == "openai:a"  # saved before aliases
    html = evaluation_html(doc)
    # An id breaks only after a ':' or '/' (a <wbr>), never at a hyphen of the model's name.
    assert id_parts("openai:gpt-6-luna") == ["openai:", "gpt-6-luna"] and id_parts("small") == ["small"]
    assert id_parts("openrouter:meta/llama-3/v") == ["openrouter:", "meta/", "llama-3/", "v"]
    assert ('<th><span class="ipyagent-id">good/</span><wbr><span class="ipyagent-id">v</span> '
            '<span class="ipyagent-eval-rate">100%</span><br><span class="ipyagent-meta"><span class="ipyagent-id">'
            'openai:</span><wbr><span class="ipyagent-id">a/</span><wbr>'
            '<span class="ipyagent-id">v</span></span></th>') in html
    # the summary's column: the alias, then the id dim
    assert ('<td>good/v <span class="ipyagent-meta">(<span class="ipyagent-id">openai:</span><wbr>'
            '<span class="ipyagent-id">a/</span><wbr><span class="ipyagent-id">v</span>)</span></td>') in html
    assert r"| # | good/v \(openai:a/v\) | ll/v \(openrouter:meta/llama/v\) |" in evaluation_markdown(doc)
    assert any(line.startswith("good/v (openai:a/v)  ") for line in evaluation_text(doc).splitlines())


def test_a_run_named_by_an_alias_says_it_before_the_id_in_its_footer() -> None:
    assert footer_figures(Transcript(provider="openai:qwen", alias="local"))[0] == "local · openai:qwen"
    assert footer_figures(Transcript(provider="openai:qwen", alias="openai:qwen"))[0] == "openai:qwen"
    assert footer_figures(Transcript(provider="openai:qwen"))[0] == "openai:qwen"  # saved before aliases


def test_an_agent_cell_run_by_an_alias_names_it_in_its_footer(ip, capsys) -> None:
    with StubServer(openai_text_reply("ok"), openai_text_reply("ok")) as server:
        ip.run_line_magic("provider", f"--alias local openai:qwen --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "-p local", "hi")
        first = capsys.readouterr().out
        ip.run_line_magic("provider", f"openai:qwen --base-url {server.url}/v1")
        ip.run_cell_magic("agent", "-p openai:qwen", "hi")
        second = capsys.readouterr().out
    assert "[local · openai:qwen · " in first
    assert "[openai:qwen · " in second and "local" not in second


def test_an_alias_of_an_alias_takes_all_its_options(ip, capsys, monkeypatch) -> None:
    """Its base URL above all: without it the prompt, and the provider's own key, would go to the
    provider's own host (here api.openai.com) instead of the server the user named."""
    monkeypatch.setenv("CORP_KEY", "sk-corp-123456")
    with StubServer(openai_text_reply("ok")) as server:
        ip.run_line_magic("provider", f"--alias local openai:qwen --base-url {server.url}/v1 --api-key-env CORP_KEY "
                                      "--price-as openai:gpt-4o")
        ip.run_line_magic("provider", "--alias l2 local")
        assert capsys.readouterr().out.splitlines()[-1] == f"alias: l2 = openai:qwen at {server.url}/v1"
        assert ip.magics_manager.registry["ProviderMagics"].alias_options["l2"] == {
            "base_url": f"{server.url}/v1", "api_key_env": "CORP_KEY", "price_as": "openai:gpt-4o"}
        ip.run_cell_magic("agent", "-p l2 -o result", "secret company data")
    assert ip.user_ns["result"].ok, ip.user_ns["result"].error
    assert [r["headers"]["Authorization"] for r in server.requests] == ["Bearer sk-corp-123456"]


def test_an_alias_of_an_alias_keeps_the_options_given_over_the_ones_it_takes(ip) -> None:
    ip.run_line_magic("provider", "--alias local openai:qwen --base-url http://127.0.0.1:9/v1 --api-key-env CORP_KEY")
    ip.run_line_magic("provider", "--alias l2 local --base-url http://127.0.0.1:10/v1")
    assert ip.magics_manager.registry["ProviderMagics"].alias_options["l2"] == {
        "base_url": "http://127.0.0.1:10/v1", "api_key_env": "CORP_KEY"}


def test_an_alias_set_as_the_provider_with_an_option_keeps_its_base_url(ip, capsys, monkeypatch) -> None:
    """``%provider local --api-key-env VAR`` adds the variable to the alias's options, not instead
    of them (its base URL lost, the key would go to the provider's own host)."""
    monkeypatch.setenv("CORP_KEY", "sk-corp-123456")
    with StubServer(openai_text_reply("ok")) as server:
        ip.run_line_magic("provider", f"--alias local openai:qwen --base-url {server.url}/v1")
        ip.run_line_magic("provider", "local --api-key-env CORP_KEY")
        assert f"provider: openai:qwen at {server.url}/v1" in capsys.readouterr().out
        ip.run_cell_magic("agent", "-o result", "hi")
    assert ip.user_ns["result"].ok, ip.user_ns["result"].error
    assert [r["headers"]["Authorization"] for r in server.requests] == ["Bearer sk-corp-123456"]


def test_python_s_agent_named_by_an_alias_goes_where_the_alias_says(ip, monkeypatch) -> None:
    """``Agent("local")`` in the notebook that declared ``local``: its base URL, not api.openai.com
    with the provider's key (Python read only the id the alias stands for)."""
    from ipyagent import Agent

    monkeypatch.setenv("CORP_KEY", "sk-corp-123456")
    ip.run_line_magic("provider", "--alias local openai:qwen --base-url http://127.0.0.1:9/v1 --api-key-env CORP_KEY")
    ip.run_line_magic("provider", "--alias l2 local")
    for name in ("local", "l2"):
        driver = Agent(name).driver
        assert (driver.id, driver.base_url, driver.key_env) == ("openai:qwen", "http://127.0.0.1:9/v1", "CORP_KEY")
    assert Agent("local", base_url="http://127.0.0.1:10/v1").driver.base_url == "http://127.0.0.1:10/v1"
