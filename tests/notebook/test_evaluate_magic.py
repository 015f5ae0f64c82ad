"""``%%compare --over`` in terminal IPython, the rendering of the saved matrix (pages, colours,
escaping), and the one-prompt compare's DataFrame columns."""

from __future__ import annotations

import decimal
import json
import re
from html.parser import HTMLParser

import pytest
from IPython.core.error import UsageError

from ipyagent import Agent, Evaluation, compare, evaluate
from ipyagent.agent import EvalResult
from ipyagent.agent.evaluation.checks import Outcome
from ipyagent.notebook.render.evaluation import (
    MIME_TYPE,
    PAGE,
    evaluation_html,
    evaluation_markdown,
    evaluation_text,
    headline,
)
from ipyagent.notebook.views.evaluation_view import bundle

from ..support.stub_server import StubServer
from ..support.evaluation import CAPITALS, answering, capital_of, last_user_text
from ..support.shell import KEY_VARS


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def test_over_rows_with_assertions_binds_the_evaluation_and_prints_the_summary(ip, capsys) -> None:
    with (
        StubServer(responder=answering(capital_of)) as a,
        StubServer(responder=answering(lambda q: "No idea at all.")) as b,
    ):
        ip.run_line_magic("provider", f"--alias good openai:m1 --base-url {a.url}")
        ip.run_line_magic("provider", f"--alias bad openai:m2 --base-url {b.url}")
        ip.user_ns["rows"] = CAPITALS
        ip.user_ns["short"] = lambda result, row: len(result.text) < 30
        # The first magic after %load_ext: its line must reach it unexpanded ({{ }} is Jinja, not IPython's).
        returned = ip.run_cell_magic("compare", "good bad --over rows --assert 'contains:{{ row.capital }}' "
                                     "--assert python:short --concurrency 2 -o ev", "Capital of {{ row.country }}?")
    assert returned is None  # the cell does not echo; -o binds
    ev = ip.user_ns["ev"]
    assert isinstance(ev, Evaluation) and ev.assertions == ["contains:{{ row.capital }}", "python:short"]
    assert [r.passed for r in ev.ordered()] == [True, False] * 3
    assert sorted(last["body"]["messages"][-1]["content"] for last in a.requests) == sorted(
        f"Capital of {c['country']}?" for c in CAPITALS
    )
    out = capsys.readouterr().out
    assert "2 providers × 3 rows: 6 of 6 runs, 3 passed" in out
    good = next(line for line in out.splitlines() if line.startswith("good (openai:m1)"))  # the alias, then the id
    # pass rate (95% CI), passed, failed, errors, median s, tokens in / out (no cost: no price known)
    assert re.match(r"good \(openai:m1\)\s+100% \(44%–100%\)\s+3\s+0\s+0\s+0\.\d\d\s+30 / 12$", good)


def test_rows_with_dates_decimals_and_numpy_numbers_are_shown_and_bound(ip, capsys) -> None:
    """A date column (or a Decimal, a numpy number, bytes, a set) once failed the matrix's display after
    every run was sent and paid: a traceback, nothing bound, and the same on every re-run."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"country": ["France", "Japan"], "when": pd.to_datetime(["2020-01-01", "2021-06-30"]),
                          "price": [decimal.Decimal("1.5"), decimal.Decimal("2")], "n": [1, 2],
                          "raw": [b"a", b"b"], "tags": [{"x"}, {"y"}], "gap": pd.to_timedelta(["1D", "2h"])})
    with StubServer(responder=answering(lambda question: question)) as server:
        ip.run_line_magic("provider", f"--alias dated openai:m --base-url {server.url}")
        ip.user_ns["frame"] = frame
        ip.run_cell_magic("compare", "dated --over frame --assert 'contains:{{ row.country }}' -o ev",
                          "Capital of {{ row.country }} on {{ row.when }}?")
    ev = ip.user_ns["ev"]
    assert [r.passed for r in ev.ordered()] == [True, True] and len(server.requests) == 2
    assert ev.ordered()[1].text == "Capital of Japan on 2021-06-30 00:00:00?"
    assert "1 provider × 2 rows: 2 of 2 runs, 2 passed" in capsys.readouterr().out
    data, _ = bundle(ev)
    doc = json.loads(json.dumps(data[MIME_TYPE], allow_nan=False))
    assert doc["results"][1]["fields"]["when"] == "2021-06-30 00:00:00" and doc["results"][1]["fields"]["n"] == 2


def test_a_rerun_is_served_from_the_cache_and_no_cache_runs_again(ip, capsys) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"] = CAPITALS
        for _ in range(2):
            ip.run_cell_magic("compare", "openai:m --over rows -o ev", "Capital of {{ row.country }}?")
        assert len(server.requests) == 3 and all(r.cached for r in ip.user_ns["ev"].results)
        # The terminal's headline says so, with a wall time in milliseconds (it said "0.0 s").
        ms = round(ip.user_ns["ev"].wall_s * 1000)
        assert (
            f"1 provider × 3 rows: 3 of 3 runs (3 from the cache), 3 passed, {ms} ms"
            in capsys.readouterr().out.splitlines()
        )
        ip.run_cell_magic("compare", "openai:m --over rows --no-cache -o ev", "Capital of {{ row.country }}?")
        assert len(server.requests) == 6 and not any(r.cached for r in ip.user_ns["ev"].results)


@pytest.mark.parametrize(
    "line, cell, message",
    [
        ("openai:m --over nope", "{{ row }}", "--over: 'nope' is not defined"),
        (
            "openai:m --over rows --assert startswith:x",
            "{{ row.country }}",
            "--assert: unknown assertion 'startswith:x'",
        ),
        (
            "openai:m --over rows --assert python:missing",
            "{{ row.country }}",
            "--assert: python:missing: no function 'missing'",
        ),
        ("openai:m --over rows --assert schema", "{{ row.country }}", "give the model with --schema MODEL"),
        ("openai:m --assert contains:x", "hi", "--assert goes with --over VAR"),
        ("openai:m --over rows --concurrency 0", "{{ row.country }}", "--concurrency must be 1 or more"),
        ("openai:m --over rows --budget -1", "{{ row.country }}", "--budget must be a number of USD, 0 or more "
         "(leave it out for no limit), not -1.0"),
        # nan passed every comparison but the one refused (every run then skipped); inf is no budget: leave it out
        ("openai:m --over rows --budget nan", "{{ row.country }}", "--budget must be a number of USD, 0 or more "
         "(leave it out for no limit), not nan"),
        ("openai:m --over rows --budget inf", "{{ row.country }}", "not inf"),
        # a judge without its key: one line before any request, not a failed verdict on every row
        ("openai:m --over rows --assert judge:anthropic:nokey", "{{ row.country }}", "--assert judge:anthropic:nokey: "
         "the judge cannot be built: ANTHROPIC_API_KEY is not set"),
        ("openai:m --over rows --rubric 'be good'", "{{ row.country }}", "--rubric goes with a judge"),
        ("openai:m --over rows", "{{ row.land }}", "row 0: the template: 'dict object' has no attribute 'land'"),
        ("openai:m --over rows --runs 2", "{{ row.country }}", "--runs goes without --over"),
        ("openai:m --over rows --repeat 0", "{{ row.country }}", "--repeat must be 1 or more"),
        ("openai:m --over rows --check-timeout 0", "{{ row.country }}", "--check-timeout must be more than 0 seconds"),
        ("openai:m --over rows --variant terse=nope", "{# -- #}", "--variant terse=nope: 'nope' is not defined"),
        ("openai:m --over rows --variant terse", "{# -- #}", "--variant takes NAME=VAR"),
        (
            "openai:m --over rows --variant terse=rows",
            "{# -- #}",
            "--variant terse=rows: 'rows' is a list, not a string",
        ),
        ("openai:m --over rows --variant t=tpl", "{{ row.country }}", "the cell's prompt and --variant"),
        (
            "openai:m --over rows",
            "intro\n--- variant a ---\n{{ row.country }}",
            "text above its first '--- variant NAME ---'",
        ),
        (
            "openai:m --over rows",
            "--- variant a ---\n{{ row.country }}\n--- variant a ---\nx",
            "the variant 'a' is given twice",
        ),
        ("openai:m --over rows", "--- variant a ---\n  \n--- variant b ---\nx", "the variant 'a' is empty"),
        ("openai:m --repeat 2", "hi", "--repeat goes with --over VAR"),
        ("openai:m --gate 'pass_rate>=0.9'", "hi", "--gate goes with --over VAR"),
        (
            "openai:m --over rows --gate 'speed>=1'",
            "{{ row.country }}",
            "--gate: gate 'speed>=1': unknown metric 'speed'",
        ),
        # a column that is neither PROVIDER:MODEL nor an alias: nothing sent, not a matrix with one column failing
        ("m openai:m --over rows", "{{ row.country }}", "expected PROVIDER:MODEL"),
        ("openai:m nosuch:m --over rows", "{{ row.country }}", "unknown provider 'nosuch'"),
    ],
)
def test_bad_options_are_one_clear_line_before_anything_runs(ip, line, cell, message) -> None:
    ip.user_ns["rows"] = CAPITALS
    ip.user_ns["tpl"] = "{{ row.country }}"
    with StubServer(responder=answering(capital_of)) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        with pytest.raises(UsageError, match=re.escape(message)):
            ip.run_cell_magic("compare", line, cell)
    assert not server.requests


def test_variants_from_the_cell_and_options_are_columns_and_repeats_show_k_of_n(ip, capsys) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ip.run_line_magic("provider", f"--alias good openai:m --base-url {server.url}")
        ip.user_ns["rows"] = CAPITALS[:2]
        ip.user_ns["careful"] = "You check your answer."
        cell = ("--- variant terse ---\n{{ row.country }}?\n"
                "--- variant polite ---\nPlease, the capital of {{ row.country }}?")
        ip.run_cell_magic("compare", "good --over rows --system-variant polite=careful --repeat 2 "
                          "--assert 'contains:{{ row.capital }}' -o ev", cell)
        ev = ip.user_ns["ev"]
        assert len(server.requests) == 2 * 2 * 2
        systems = sorted(
            r["body"]["messages"][0]["content"] for r in server.requests if len(r["body"]["messages"]) == 2
        )
        assert systems == ["You check your answer."] * 4
    assert ev.columns == ["openai:m/terse", "openai:m/polite"] and ev.column("good/polite") == "openai:m/polite"
    assert [r.repeat for r in ev.cells(0, "good/terse")] == [0, 1]
    out = capsys.readouterr().out
    assert "2 columns (1 provider × 2 variants) × 2 rows × 2 repeats: 8 of 8 runs, 8 passed" in out
    html = evaluation_html(ev.to_json())
    assert ('<th><span class="ipyagent-id">good/</span><wbr><span class="ipyagent-id">terse</span> '
            '<span class="ipyagent-eval-rate">100%</span><br><span class="ipyagent-meta"><span class="ipyagent-id">'
            'openai:</span><wbr><span class="ipyagent-id">m/</span><wbr>'
            '<span class="ipyagent-id">terse</span></span></th>') in html
    assert html.count("✓ 2/2 passed · ") == 4
    assert "repeat 2: ✓" in html
    with StubServer(responder=answering(capital_of)) as server:  # --variant NAME=VAR: prompts held in strings
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["short"] = "{{ row.country }}?"
        ip.run_cell_magic("compare", "openai:m --over rows --variant short=short --variant careful=careful -o ev",
                          "{# the prompts are in --variant #}")
        assert sorted(last_user_text(r["body"]) for r in server.requests) == [
            "France?", "Japan?", "You check your answer.", "You check your answer."]
    assert ip.user_ns["ev"].columns == ["openai:m/short", "openai:m/careful"]


def test_rows_of_strings_render_as_row(ip) -> None:
    with StubServer(responder=answering(lambda q: q.upper())) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"] = ["alpha", "beta"]
        ip.run_cell_magic(
            "compare", "openai:m --over rows --assert 'equals:SAY {{ row | upper }}' -o ev", "say {{ row }}"
        )
    assert [r.passed for r in ip.user_ns["ev"].ordered()] == [True, True]


def test_the_values_a_row_puts_in_a_prompt_pass_the_context_rule(ip, capsys) -> None:
    """A row's key, a field or a variable under a secret-looking name reached the provider as they were:
    the prompts of ``%%compare --over`` are cell templates, so they pass the context rule as ``%%agent``'s do
    (and ``%agent settings redact_context=false`` sends them as they are)."""
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234"
    with StubServer(responder=answering(lambda q: "ok")) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"] = [{"q": f"my key {key}", "password": "hunter2hunter2", "city": "Lima"}]
        ip.user_ns["api_token"] = "tok-1234567890abcdef"
        cell = "{{ row.q }} / {{ row['password'] }} / {{ api_token }} / {{ row }} / {{ row.city }}"
        ip.run_cell_magic("compare", "openai:m --over rows -o ev", cell)
        sent = [last_user_text(r["body"]) for r in server.requests]
        assert sent == ["my key [redacted] / [redacted] / [redacted] / "
                        "{'q': 'my key [redacted]', 'password': '[redacted]', 'city': 'Lima'} / Lima"]
        assert ip.user_ns["ev"].ordered()[0].prompt == sent[0]  # the matrix and the store show what was sent
        ip.run_line_magic("agent", "settings redact_context=false")
        try:
            ip.run_cell_magic("compare", "openai:m --over rows", "{{ row.q }} / {{ row.password }}")
        finally:
            ip.run_line_magic("agent", "settings redact_context=true")
        assert last_user_text(server.requests[-1]["body"]) == f"my key {key} / hunter2hunter2"
    ip.user_ns.pop("api_token")


def _evaluation(n_rows: int, answer=capital_of) -> Evaluation:
    rows = [CAPITALS[n % 3] for n in range(n_rows)]
    with StubServer(responder=answering(answer)) as server:
        return evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", rows,
                        assertions=["contains:{{ row.capital }}"], concurrency=8, store=False)


def test_the_saved_matrix_pages_long_evaluations_and_colours_each_cell() -> None:
    doc = _evaluation(PAGE + 5).to_json()
    html = evaluation_html(doc)
    assert html.count('class="ipyagent-eval-page"') == 2  # rows 0–49, 50–54
    assert "rows 0–49 (page 1 of 2)" in html and "rows 50–54 (page 2 of 2)" in html
    assert html.count("ipyagent-eval-cell ipyagent-eval-pass") == PAGE + 5
    small = evaluation_html(_evaluation(3).to_json())
    assert "ipyagent-eval-page" not in small and small.count("<details>") == 3
    assert "✓ The capital is Paris." in small


def test_model_text_in_the_matrix_is_escaped_and_outcomes_say_why() -> None:
    doc = _evaluation(2, answer=lambda q: '<img src="https://evil.example/x.png" onerror="alert(1)"> no').to_json()
    html = evaluation_html(doc)
    tags: list[tuple[str, list]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, attrs))

    Tags().feed(html)
    assert not [t for t, _ in tags if t in ("img", "script")] and not [
        a for _, attrs in tags for a, _ in attrs if a.startswith("on")
    ]
    assert "&lt;img" in html  # shown as text
    assert "ipyagent-eval-fail" in html and "the answer does not contain &#x27;Paris&#x27;" in html.replace(
        "'", "&#x27;"
    )
    markdown = evaluation_markdown(doc)
    assert "| # | openai:m |" in markdown and "✗" in markdown
    assert evaluation_text(doc).startswith("1 provider × 2 rows: 2 of 2 runs, 0 passed")


def test_cells_not_rendered_flaky_repeats_and_the_budget_are_drawn() -> None:
    ev = Evaluation(["openai:m"], ["a", "b"], assertions=["contains:x"], repeat=2, budget=0.5, spent=0.48, reserved=0.0)
    passed = lambda n, k, ok: EvalResult(n, "openai:m", "p", {"value": "a"}, repeat=k, passed=ok, text="ans",
                                         outcomes=[Outcome("contains:x", ok)])
    ev.results = [
        passed(0, 0, True),
        passed(0, 1, False),
        *[
            EvalResult(
                1,
                "openai:m",
                "",
                {"value": "b"},
                repeat=k,
                status="template_error",
                error_type="template",
                error="row 1: the template: no field",
            )
            for k in (0, 1)
        ],
    ]
    doc = ev.to_json()
    html = evaluation_html(doc)
    assert "ipyagent-eval-cell ipyagent-eval-flaky" in html and "≈ 1/2 passed · ans" in html
    assert "ipyagent-eval-cell ipyagent-eval-template" in html and "row 1: the template: no field" in html
    assert "? row 1: the template: no field</summary>" in html  # a row never sent is not "0/2 passed"
    line = headline(doc)
    assert "1 provider × 2 rows × 2 repeats: 2 of 4 runs, 1 passed" in line
    assert "; budget $0.5000: spent $0.4800, reserved $0, 0 runs skipped; 1 flaky (repeats disagree)" in line
    assert "≈ 1/2 passed · ans" in evaluation_markdown(doc)


@pytest.mark.parametrize(
    "wall_s, shown", [(0.0, "0 ms"), (0.0434, "43 ms"), (0.9994, "999 ms"), (1.0, "1.0 s"), (12.34, "12.3 s")]
)
def test_the_headline_gives_short_wall_times_in_milliseconds(wall_s, shown) -> None:
    doc = {**_evaluation(1).to_json(), "wall_s": wall_s}
    assert headline(doc).endswith(f"1 passed (contains the row's capital), {shown}")


def test_the_bundle_keeps_the_json_and_redacts_secrets(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-very-secret-123")
    ev = _evaluation(1, answer=lambda q: "the token is tok-very-secret-123")
    data, metadata = bundle(ev)
    assert set(data) == {MIME_TYPE, "text/html", "text/markdown", "text/plain"}
    assert all("tok-very-secret-123" not in str(v) for v in data.values())
    assert data[MIME_TYPE]["results"][0]["text"] == "the token is [redacted]"
    assert metadata["ipyagent"]["evaluation"] == {"id": ev.id}
    # a cell's --gate options are kept beside it, for ipyagent eval
    assert bundle(ev, ["pass_rate>=0.9"])[1]["ipyagent"]["evaluation"] == {"id": ev.id, "gates": ["pass_rate>=0.9"]}


def test_one_prompt_compare_dataframe_has_prompt_and_output() -> None:
    pytest.importorskip("pandas")
    with StubServer(responder=answering(capital_of)) as server:
        frame = compare([Agent("openai:m", base_url=server.url)], "Capital of Peru?").to_dataframe()
    assert list(frame.columns[:4]) == ["provider", "run", "prompt", "output"]
    assert frame.loc[0, "prompt"] == "Capital of Peru?" and frame.loc[0, "output"] == "The capital is Lima."


def test_the_live_view_draws_one_frame_per_frame_time_on_the_loop_whatever_the_rate_of_results(monkeypatch) -> None:
    """Results every 10 ms for a second: about ten frames, each scheduled on the loop the results end
    on (no thread per frame), and the last result's frame is drawn."""
    import asyncio
    import threading

    from ipyagent.notebook.views import evaluation_view, transcript_output

    from ..support.virtual_clock import run_virtual

    monkeypatch.setattr(transcript_output, "display", lambda obj, **kw: None, raising=False)
    monkeypatch.setattr(threading, "Timer", None)  # a thread per frame would fail here
    ev = Evaluation(["openai:m"], [f"r{n}" for n in range(100)])
    view = evaluation_view.EvaluationView(ev, widgets=True)
    sent: list[dict] = []  # the live matrix's messages (evaluation_pages.py)
    monkeypatch.setattr(view.widget, "send", sent.append)

    async def main() -> None:
        for n in range(100):
            ev.results.append(EvalResult(n, "openai:m", "q", f"r{n}", text="a", passed=True))
            view.update(ev.results[-1])
            await asyncio.sleep(0.01)
        await asyncio.sleep(evaluation_view.FRAME_S)

    run_virtual(main, monkeypatch, evaluation_view)
    assert 10 <= view.frames <= 12
    assert sent[-1]["progress"].startswith("100 / 100 runs")
