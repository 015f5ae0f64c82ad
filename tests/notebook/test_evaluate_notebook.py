"""``%%compare --over`` in a real kernel (nbclient) against scripted local servers: every assertion
kind (a judge provider included), the cache (a re-run sends nothing, --no-cache sends all), a
429 lane, a budget stop, the saved matrix; an interrupt mid-matrix; notebooks/evaluate.ipynb
replayed from its cassettes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ipyagent.drivers import current_model
from ipyagent.notebook.render.evaluation import MIME_TYPE

from ..support.kernels import wait_iopub, wait_reply, widget_values
from ..support.stub_server import Reply, StubServer, openai_text_reply
from ..support.evaluation import CAPITALS, answering, capital_of, last_user_text, limited_once

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "evaluate.ipynb"

#: The models notebooks/evaluate.ipynb replays (its cassettes name them).
OPENAI, ANTHROPIC = current_model("openai"), current_model("anthropic")


def _execute(cells: list[str], tmp_path: Path, monkeypatch) -> Any:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=90, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def _saved(cell) -> dict[str, Any]:
    (doc,) = [o["data"][MIME_TYPE] for o in cell.outputs if MIME_TYPE in o.get("data", {})]
    return doc


def _printed(cell) -> Any:
    return json.loads("".join(o["text"] for o in cell.outputs if o.get("name") == "stdout"))


def verdict(prompt: str) -> str:
    answer = prompt.split("Answer:\n", 1)[1]
    good = any(c["capital"] in answer for c in CAPITALS)
    return json.dumps({"pass": good, "reason": "names the capital" if good else "no capital named"})


def test_over_rows_in_a_kernel_every_assertion_cache_429_and_budget(tmp_path, monkeypatch) -> None:
    def structured(body: dict[str, Any]) -> Reply:
        country = next(c for c in CAPITALS if c["country"] in last_user_text(body))
        return openai_text_reply(json.dumps({"name": country["capital"], "country": country["country"]}))

    limited = limited_once(capital_of)
    with (
        StubServer(responder=answering(capital_of)) as good,
        StubServer(responder=answering(lambda q: "Somewhere nice.")) as bad,
        StubServer(responder=answering(verdict)) as judge,
        StubServer(responder=limited) as slow,
        StubServer(responder=structured) as shaped,
    ):
        over = "%%compare good bad --over rows -o {out} {extra}\nCapital of {{{{ row.country }}}}? One sentence."
        asserts = ("--assert 'contains:{{ row.capital }}' --assert 'icontains:{{ row.capital | lower }}' "
                   "--assert 'regex:^The capital is [A-Z]' --assert 'equals:The capital is {{ row.capital }}.' "
                   "--assert python:short --assert judge:grader --rubric 'Names the capital.'")
        cells = [
            "%load_ext ipyagent\n"
            f"%provider --alias good openai:gpt-4.1-mini --base-url {good.url} --price-as openai:gpt-4.1-mini\n"
            f"%provider --alias bad openai:gpt-4.1-nano --base-url {bad.url}\n"
            f"%provider --alias grader openai:gpt-4.1-nano --base-url {judge.url}\n"
            f"%provider --alias slow openai:gpt-4.1-mini --base-url {slow.url}\n"
            f"%provider --alias shaped openai:gpt-4.1-mini --base-url {shaped.url}\n"
            f"rows = {CAPITALS!r}\n"
            "def short(result, row):\n    return 1.0 if len(result.text) < 25 else 0.2\n"
            "from pydantic import BaseModel\nclass City(BaseModel):\n    name: str\n    country: str",
            over.format(out="ev", extra=asserts),
            over.format(out="again", extra=asserts),
            over.format(out="fresh", extra="--no-cache"),
            "%%compare slow good --over rows --concurrency 2 -o lane\n{{ row.country }}?",
            "%%compare shaped --over rows --schema City --strategy rule --assert schema --assert json -o shaped_ev\n"
            "Capital of {{ row.country }} as JSON.",
            "%%compare good --over rows --concurrency 1 --no-cache --max-tokens 10 --budget 0.0000195 -o capped\n"
            "Capital of {{ row.country }}?",
            "import json\nprint(json.dumps({name: [[r.row, r.provider, r.passed, r.cached, r.status, r.error_type,"
            " [(o.name, o.passed, o.reason) for o in r.outcomes]] for r in v.ordered()] for name, v in "
            "[('ev', ev), ('again', again), ('fresh', fresh), ('lane', lane), ('shaped', shaped_ev),"
            " ('capped', capped)]}))",
        ]
        nb = _execute(cells, tmp_path, monkeypatch)
        requests = {name: len(s.requests) for name, s in
                    [("good", good), ("bad", bad), ("judge", judge), ("slow", slow), ("shaped", shaped)]}
        slow_times, t429 = slow.request_times, limited.too_many.sent_at
    results = _printed(nb.cells[-1])

    ev = results["ev"]
    good_cells = [r for r in ev if r[1] == "openai:gpt-4.1-mini"]
    bad_cells = [r for r in ev if r[1] == "openai:gpt-4.1-nano"]
    assert all(r[2] is True for r in good_cells) and all(r[2] is False for r in bad_cells)
    names = [o[0] for o in good_cells[0][6]]
    assert names == ["contains:{{ row.capital }}", "icontains:{{ row.capital | lower }}", "regex:^The capital is [A-Z]",
                     "equals:The capital is {{ row.capital }}.", "python:short", "judge:grader"]
    failed = {o[0]: o[2] for o in bad_cells[0][6]}
    assert failed["contains:{{ row.capital }}"] == "the answer does not contain 'Paris'"
    assert failed["python:short"] is None and failed["judge:grader"] == "no capital named"
    assert all(o[1] for o in bad_cells[0][6] if o[0] == "python:short")  # "Somewhere nice." is short: score 1.0
    # The cache: the second cell sent nothing (models or judge); --no-cache sent every model request again.
    assert all(r[3] for r in results["again"]) and not any(r[3] for r in results["fresh"])
    assert requests["good"] == 3 + 3 + 3 + 1  # ev, fresh, lane (another prompt), capped (one run)
    assert requests["judge"] == 6
    assert requests["bad"] == 6
    # The 429 lane waited Retry-After, and every run ended ok: the retry was sent a second after the 429. (The
    # row in flight with the 429 is answered after it (`limited_once`), and the third row starts in its place:
    # on a loaded machine the client can read that answer before the 429 and send the third row at once, so
    # only the retry's wait is certain.)
    assert all(r[4] == "ok" for r in results["lane"])
    assert len(slow_times) == 4 and max(slow_times[2:]) >= t429 + 1.0
    # Structured output: schema and json assertions.
    assert all(r[2] for r in results["shaped"]) and [o[0] for o in results["shaped"][0][6]] == ["schema", "json"]
    # The budget: the first run's estimate (10 tokens out at most) fits, its real cost leaves no room for another.
    capped = results["capped"]
    assert any(r[4] == "skipped" and r[5] == "budget" for r in capped) and any(r[4] == "ok" for r in capped)

    # The saved output: the matrix JSON (no widget), with HTML and text fallbacks; the live matrix's widget.
    doc = _saved(nb.cells[1])
    assert len(doc["results"]) == 6 and doc["summary"][0]["pass_rate"] == 1.0
    bundle = next(o for o in nb.cells[1].outputs if MIME_TYPE in o.get("data", {}))["data"]
    assert "ipyagent-eval-pass" in bundle["text/html"] and "ipyagent-eval-fail" in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    # The live matrix was a widget of its own (its pages went as messages, none kept in its state).
    assert any(s.get("kind") == "evaluation" and "_esm" in s for s in widget_values(nb).values())


def test_an_interrupt_mid_matrix_keeps_the_finished_and_closes_connections(monkeypatch) -> None:
    from jupyter_client.manager import start_new_kernel

    def reply(body: dict[str, Any]) -> Reply:
        quick = last_user_text(body) in ("q0", "q1")
        return openai_text_reply("a long answer " * 30, piece=4, delay=0.0 if quick else 0.3)

    with StubServer(responder=reply) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            setup = (f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}\n"
                     "rows = [f'q{n}' for n in range(8)]")
            answer, _ = wait_reply(kc, kc.execute(setup), 30)
            assert answer["content"]["status"] == "ok", answer["content"]
            msg_id = kc.execute("%%compare openai:m --over rows --concurrency 8 -o ev\n{{ row }}")
            assert server.wait_for(lambda: len(server.requests) >= 8, 15)
            # The live matrix's progress line says 2 / 8 once the two quick rows are recorded; the six others
            # stream for ~30 s (their pieces 0.3 s apart), so they are in flight when the interrupt comes.
            seen = wait_iopub(kc, lambda m: m["msg_type"] == "comm_msg" and "2 / 8 runs" in str(m["content"]["data"]),
                              30)
            assert len(server.requests) == 8 and len(server.completed) == 2
            km.interrupt_kernel()
            answer, iopub = wait_reply(kc, msg_id, 20)
            iopub = seen + iopub
            assert answer["content"]["status"] == "error"  # Run all stops here
            assert answer["content"]["ename"] == "RunStopped"
            assert not [m for m in iopub if m["msg_type"] == "error"], "a stop printed a traceback"
            assert server.wait_for(lambda: len(server.hangups) >= 6, 5), "a stream stayed open after the interrupt"
            assert len(server.hangups) == 6
            check, iopub = wait_reply(kc, kc.execute("print(ev.interrupted, sorted(r.prompt for r in ev.results))"), 20)
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
            assert out.strip() == "True ['q0', 'q1']"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def test_evaluate_notebook_replays_its_cassettes_and_a_rerun_is_cached(tmp_path, monkeypatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(NOTEBOOK.parent))
    try:
        from make_evaluate_cassettes import CITIES, MISTAKES, REPEAT
    finally:
        sys.path.remove(str(NOTEBOOK.parent))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    docs, frames = [], []
    for _ in range(2):
        nb = nbformat.read(NOTEBOOK, as_version=4)
        NotebookClient(nb, timeout=240, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
        assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o["output_type"] == "error"]
        matrix, by_name = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%compare")]
        docs.append(_saved(matrix))
        frames.append(nb)
    first, again = docs
    runs = len(CITIES) * 2 * 2 * REPEAT  # rows x 2 models x 2 variants x repeats
    assert len(first["results"]) == runs and not any(r["cached"] for r in first["results"])
    passed = {s["column"]: s["passed"] for s in first["summary"]}
    assert passed == {f"{p}:{m}/{v}": len(CITIES) * REPEAT - sum(len(k) for k, _ in MISTAKES[p, v].values())
                      for p, m in (("openai", OPENAI), ("anthropic", ANTHROPIC))
                      for v in ("terse", "careful")}
    # The verdicts: the careful prompt beats the terse baseline on both models; Anthropic's terse one
    # cannot be told apart from it.
    verdicts = {c["column"]: (c["verdict"], c["sentence"]) for c in first["comparisons"]}
    assert verdicts[f"openai:{OPENAI}/careful"][0] == "better"
    assert verdicts[f"anthropic:{ANTHROPIC}/careful"][0] == "better"
    verdict, sentence = verdicts[f"anthropic:{ANTHROPIC}/terse"]
    assert verdict == "no significant difference"
    assert sentence.startswith("no significant difference (n=20 rows, 60 pairs")
    # The grades given in later cells are in the matrix's saved output, and the judge's agreement with them.
    graded = sorted((r["row"], r["column"], r["human"]) for r in first["results"] if r["human"] is not None)
    terse_openai, terse_anthropic = f"openai:{OPENAI}/terse", f"anthropic:{ANTHROPIC}/terse"
    assert graded == [(0, terse_openai, True), (5, terse_openai, False),
                      (13, terse_anthropic, True), (16, terse_anthropic, False)]
    (agreement,) = first["agreement"]
    assert (agreement["n"], agreement["percent"], agreement["kappa"]) == (4, 75.0, pytest.approx(0.5))
    compare_cell = next(c for c in frames[0].cells if c.source.startswith("%%compare"))
    html = next(o for o in compare_cell.outputs if MIME_TYPE in o.get("data", {}))["data"]["text/html"]
    assert "human ✓" in html and "better by 15 points" in html
    # The diff: the name check alone passes the three Bolivia runs only the judge failed.
    diff = [c for c in frames[0].cells if c.cell_type == "code" and c.source.startswith("by_name.diff(ev)")][0]
    assert diff.outputs[0]["data"]["text/html"].count("fixed") == 3
    # Run again: every run from the store, the same verdicts, and nothing changed since the last run.
    assert all(r["cached"] for r in again["results"])
    assert [r["passed"] for r in again["results"]] == [r["passed"] for r in first["results"]]
    assert again["changes"]["sentence"] == "since the last run: no change"


def _execute_allowing_errors(cells: list[str], tmp_path: Path, monkeypatch) -> Any:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=90, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def _tracebacks(nb) -> list[Any]:
    return [o for c in nb.cells for o in c.outputs if o["output_type"] == "error" and o.get("traceback")]


def test_rows_that_cannot_be_rendered_are_template_errors_and_the_rest_runs(tmp_path, monkeypatch) -> None:
    rows = [{"country": "France", "capital": "Paris", "pattern": "Par.s"},
            {"country": "Japan", "pattern": "Tok.o"},  # no capital, which --assert contains: uses
            {"country": "Peru", "capital": "Lima", "pattern": "Lim(a"}]  # an invalid pattern
    with StubServer(responder=answering(capital_of)) as server:
        cells = [
            f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}\nrows = {rows!r}\nbad = [{{'x': 1}}]",
            "%%compare openai:m --over rows --assert 'contains:{{ row.capital }}' --assert 'regex:{{ row.pattern }}' "
            "-o ev\nCapital of {{ row.country }}?",
            "import json\nprint(json.dumps([[r.row, r.status, r.error] for r in ev.ordered()]))",
            "%%compare openai:m --over bad -o nothing\nCapital of {{ row.country }}?",
            "print('nothing' in globals())",
        ]
        nb = _execute_allowing_errors(cells, tmp_path, monkeypatch)
        sent = [last_user_text(r["body"]) for r in server.requests]
    assert sent == ["Capital of France?"]  # row 0 only; the matrix with no row rendered sent nothing
    results = _printed(nb.cells[2])
    assert results[0][:2] == [0, "ok"]
    assert results[1] == [
        1,
        "template_error",
        "row 1: check contains:{{ row.capital }}: the template: 'dict object' has no attribute 'capital'",
    ]
    assert results[2][:2] == [2, "template_error"]
    assert results[2][2].startswith("row 2: check regex:{{ row.pattern }}: 'Lim(a' is not a valid pattern")
    doc = _saved(nb.cells[1])
    assert doc["notes"][0].startswith("2 rows could not be rendered (not sent: template_error): row 1: check")
    assert not _tracebacks(nb), "a template error printed a traceback"
    said = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "no row could be rendered, so nothing was sent: 1 row could not be rendered" in said
    assert "row 0: the template: 'dict object' has no attribute 'country'" in said
    assert "".join(o["text"] for o in nb.cells[4].outputs).strip() == "False"


def test_a_catastrophic_regex_ends_within_the_timeout_and_the_kernel_answers(monkeypatch) -> None:
    from jupyter_client.manager import start_new_kernel

    with StubServer(responder=answering(lambda q: "a" * 50 + "b")) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            answer, _ = wait_reply(
                kc, kc.execute(f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}"), 30
            )
            assert answer["content"]["status"] == "ok", answer["content"]
            cell = ("%%compare openai:m --over rows --timeout 5 --assert 'regex:^(a+)+$' --assert 'regex:^(a|a)+$' "
                    "--assert 'regex:a+b$' -o ev\n{{ row }}")
            wait_reply(kc, kc.execute("rows = ['q']"), 10)
            answer, iopub = wait_reply(kc, kc.execute(cell), 30)  # a pattern run out would hold the cell for minutes
            assert answer["content"]["status"] == "ok", answer["content"]
            shown = kc.execute("print([(o.name, o.passed, o.reason) for o in ev.results[0].outcomes])")
            answer, iopub = wait_reply(kc, shown, 10)  # the kernel answers the next cell
            out = "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream")
            outcomes = eval(out)  # noqa: S307 - the kernel printed a list of tuples
            assert outcomes == [("regex:^(a+)+$", False, "the answer has no match for '^(a+)+$'"),
                                ("regex:^(a|a)+$", False, "timed out: the pattern ran past 1 s"),
                                ("regex:a+b$", True, None)]
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def test_after_a_sigkill_a_rerun_sends_only_the_runs_that_had_not_finished(tmp_path) -> None:
    import signal
    import threading

    from jupyter_client.manager import start_new_kernel

    sent: list[tuple[str, Reply]] = []  # every reply with its prompt; `reply.sent` once written whole
    lock = threading.Lock()

    def reply(body: dict[str, Any]) -> Reply:
        answer = openai_text_reply("done " + last_user_text(body), delay=0.01)
        with lock:
            sent.append((last_user_text(body), answer))
        return answer

    def answered() -> set[str]:
        with lock:
            return {prompt for prompt, r in sent if r.sent.is_set()}

    setup = ("%load_ext ipyagent\n%provider openai:m --base-url URL\n"
             f"%agent store {tmp_path / 'runs.sqlite'}\nrows = [f'q{{n}}' for n in range(400)]")
    matrix = "%%compare openai:m --over rows --concurrency 4 -o ev\n{{ row }}"
    with StubServer(responder=reply) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            answer, _ = wait_reply(kc, kc.execute(setup.replace("URL", server.url)), 30)
            assert answer["content"]["status"] == "ok", answer["content"]
            kc.execute(matrix)
            assert server.wait_for(lambda: len(answered()) >= 100, 60)  # looked at on each reply sent whole
            km.signal_kernel(signal.SIGKILL)  # no clean-up of any kind
            before = answered()
            assert 100 <= len(before) < 400
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        with lock:
            sent.clear()
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            answer, _ = wait_reply(kc, kc.execute(setup.replace("URL", server.url)), 30)
            assert answer["content"]["status"] == "ok", answer["content"]
            answer, _ = wait_reply(kc, kc.execute(matrix), 120)
            assert answer["content"]["status"] == "ok", answer["content"]
            _, iopub = wait_reply(kc, kc.execute("print(sum(r.cached for r in ev.results), len(ev.results))"), 10)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    with lock:
        again = [prompt for prompt, _ in sent]
    paid_twice = [p for p in again if p in before]
    assert len(paid_twice) <= 4, f"{len(paid_twice)} finished runs were sent again"  # at most the ones in flight
    assert len(set(again)) == len(again) and set(again) | before == {f"q{n}" for n in range(400)}
    cached, total = map(int, "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream").split())
    assert total == 400 and cached == 400 - len(again)


def test_the_budget_holds_at_concurrency_8_and_the_skipped_runs_are_counted(tmp_path, monkeypatch) -> None:
    # gpt-4.1: $2 / M tokens in, $8 / M out; 20,000 tokens out (--max-tokens, the first estimate): $0.16 a run.
    with StubServer(responder=lambda body: openai_text_reply("ok", usage=(10, 20_000))) as server:
        cells = [
            f"%load_ext ipyagent\n%provider --alias big openai:gpt-4.1 --base-url {server.url}"
            " --price-as openai:gpt-4.1\n"
            "rows = [f'q{n}' for n in range(24)]",
            "%%compare big --over rows --budget 0.50 --concurrency 8 --max-tokens 20000 -o ev\n{{ row }}",
            "print(json.dumps([ev.spent, ev.reserved, ev.skipped, sum(r.cost or 0 for r in ev.results)]))",
        ]
        nb = _execute(["import json", *cells], tmp_path, monkeypatch)
        requests = len(server.requests)
    spent, reserved, skipped, costs = _printed(nb.cells[-1])
    assert requests == 3 and spent == pytest.approx(costs) and spent <= 0.50 and reserved == 0
    assert skipped == 21
    headline = _saved(nb.cells[2])
    assert headline["skipped"] == 21 and headline["spent"] <= 0.50
    shown = next(o for o in nb.cells[2].outputs if MIME_TYPE in o.get("data", {}))["data"]["text/plain"]
    assert "budget $0.5000: spent $0.4801, reserved $0, 21 runs skipped" in shown
