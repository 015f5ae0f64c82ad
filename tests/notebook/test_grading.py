"""Grades and statistics of ``%%compare --over`` in terminal IPython: ``--baseline``, ``%agent
grade`` (kept in the run store, shown in the matrix apart from the automatic result), what a
page's click asks the kernel (`grading.grade_request`), the statistics under the saved matrix and
what changed since the cell's last run; and in a kernel (nbclient), a grade given in a later cell
written into the saved matrix by a display update."""

from __future__ import annotations

import re
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipyagent.memory.store import RunStore
from ipyagent.notebook import grading
from ipyagent.notebook.render.evaluation import MIME_TYPE, evaluation_html, evaluation_markdown, evaluation_text

from ..support.evaluation import CAPITALS, answering, capital_of
from ..support.shell import KEY_VARS
from ..support.stub_server import StubServer


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def _two_providers(ip: Any, good: StubServer, bad: StubServer) -> None:
    ip.run_line_magic("provider", f"--alias good openai:m1 --base-url {good.url}")
    ip.run_line_magic("provider", f"--alias bad openai:m2 --base-url {bad.url}")
    ip.user_ns["rows"] = CAPITALS


def test_baseline_grades_and_statistics_in_the_terminal(ip, capsys, tmp_path) -> None:
    unknown = "--baseline: no column 'ugly'; the columns are openai:m1, openai:m2"
    clueless = answering(lambda q: "No idea.")
    with StubServer(responder=answering(capital_of)) as good, StubServer(responder=clueless) as bad:
        _two_providers(ip, good, bad)
        with pytest.raises(UsageError, match=re.escape(unknown)):
            ip.run_cell_magic("compare", "good bad --over rows --baseline ugly", "Capital of {{ row.country }}?")
        assert not good.requests
        ip.run_cell_magic("compare", "good bad --over rows --assert 'contains:{{ row.capital }}' --baseline bad -o ev",
                          "Capital of {{ row.country }}?")
        out = capsys.readouterr().out
    ev = ip.user_ns["ev"]
    assert ev.baseline == "openai:m2"
    # named by the alias, then the id
    assert ("good (openai:m1) vs bad (openai:m2): no significant difference (n=3, need ≈ 783 rows to detect a "
            "10-point gap)") in out
    stats = [line for line in out.splitlines() if line.startswith("good (openai:m1)  ")][-1]  # the statistics table's
    assert re.match(r"good \(openai:m1\)\s+3\s+100% \(44%–100%\)\s+—\s+[0-9.]+\s+—\s+\+100 \(\+100 to \+100\)\s+"
                    r"0.250\s+no significant difference$", stats)
    ip.run_line_magic("agent", "grade 1 good fail 'Tokyo, but rude'")
    ip.run_line_magic("agent", "grade 2 openai:m2 pass --eval ev")
    assert capsys.readouterr().out.splitlines() == ["row 1 on openai:m1 (repeat 0): fail — Tokyo, but rude",
                                                   "row 2 on openai:m2 (repeat 0): pass"]
    assert [(r.row, r.column, r.human) for r in ev.ordered() if r.human is not None] == [
        (1, "openai:m1", False), (2, "openai:m2", True)]
    store = RunStore(ev.store_path)
    assert store.grades([ev.cell(1, "openai:m1").run_id])[ev.cell(1, "openai:m1").run_id]["note"] == "Tokyo, but rude"
    store.close()
    doc = ev.to_json()
    assert "human ✗" in evaluation_html(doc) and "Tokyo, but rude" in evaluation_html(doc)
    assert "✓ The capital is Tokyo. (human ✗)" in evaluation_markdown(doc)
    for line, message in [("grade 9 good pass", "row 9 on openai:m1 (repeat 0) has not finished"),
                          ("grade 0 nobody pass", "no column 'nobody'"), ("grade 0 good maybe", "invalid choice"),
                          ("grade 0 good pass --eval rows", "'rows' is not an Evaluation")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            ip.run_line_magic("agent", line)


def test_the_cells_next_run_says_what_changed_since_the_last(ip, capsys) -> None:
    answers = {"France": "The capital is Paris.", "Japan": "The capital is Tokyo.", "Peru": "The capital is Lima."}
    with StubServer(responder=answering(lambda q: answers[q.split()[-1].rstrip("?")])) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"] = CAPITALS[:2]
        line = "openai:m --over rows --assert 'contains:{{ row.capital }}' --no-cache -o ev"
        ip.run_cell_magic("compare", line, "Capital of {{ row.country }}?")
        assert "since the last run" not in capsys.readouterr().out
        answers["Japan"] = "The capital is Kyoto."
        ip.user_ns["rows"] = CAPITALS
        ip.run_cell_magic("compare", line, "Capital of {{ row.country }}?")
    assert "since the last run: 1 newly failing, 1 new row" in capsys.readouterr().out
    assert ip.user_ns["ev"].to_json()["row_flags"] == {"failed": [1], "disagree": [], "changed": [1, 2]}


def test_the_same_cell_over_another_variable_is_not_compared_with_the_last_run(ip, capsys) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"], ip.user_ns["others"] = CAPITALS[:2], CAPITALS[2:]
        for over in ("rows", "others", "rows"):
            ip.run_cell_magic("compare", f"openai:m --over {over} --assert 'contains:{{{{ row.capital }}}}' -o ev",
                              "Capital of {{ row.country }}?")
            out = capsys.readouterr().out
            if over == "others":  # unrelated rows: no "2 new rows, 2 rows gone"
                assert "since the last run" not in out and ip.user_ns["ev"].changes is None
    # over rows again: compared with the run over rows, not with the one over others between them
    assert "since the last run: no change" in out and ip.user_ns["ev"].name == "#-o ev --over rows"


def test_a_cells_name_is_its_notebook_cell_and_dataset(ip, monkeypatch) -> None:
    from types import SimpleNamespace

    from ipyagent.notebook.magics.evaluation import cell_name

    args = SimpleNamespace(out=None, over="rows")
    assert cell_name(ip, args) == "#--over rows"
    assert cell_name(ip, SimpleNamespace(out="ev", over="df")) == "#-o ev --over df"
    monkeypatch.setenv("JPY_SESSION_NAME", "nb.ipynb")
    kernel = SimpleNamespace(get_parent=lambda channel: {"metadata": {"cellId": "c-1"}} if channel == "shell" else {})
    monkeypatch.setattr(ip, "kernel", kernel, raising=False)
    assert cell_name(ip, SimpleNamespace(out="ev", over="df")) == "nb.ipynb#c-1 --over df"


class _Store:
    def __init__(self) -> None:
        self.grades: list[tuple[str, Any, str]] = []

    def set_grade(self, run_id: str, passed: Any, note: str) -> None:
        self.grades.append((run_id, passed, note))


def test_a_page_grades_a_run_and_gets_the_new_output(ip) -> None:
    with StubServer(responder=answering(capital_of)) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["rows"] = CAPITALS
        ip.run_cell_magic("compare", "openai:m --over rows -o ev", "Capital of {{ row.country }}?")
    ev = ip.user_ns["ev"]
    store = _Store()
    asked = {"evaluation": ev.id, "row": 2, "column": "openai:m", "repeat": 0, "passed": False, "note": "too short"}
    answer = grading.grade_request(asked, lambda: store)
    assert answer["ok"] is True and not store.grades  # the evaluation is known: graded there, kept in its store
    assert ev.cell(2, "openai:m").human is False
    graded = answer["output"]["data"][MIME_TYPE]["results"][2]
    assert (graded["human"], graded["human_note"]) == (False, "too short")
    assert grading.grade_request({**asked, "column": "x"}, lambda: store) == {
        "ok": False, "message": "not graded: no column 'x'; the columns are openai:m"}
    assert grading.grade_request({**asked, "passed": "yes"}, lambda: store)["message"] == (
        "not graded: passed is true, false or null, not 'yes'")
    # A kernel that did not run it (restarted) keeps the grade by the run's id, and says to run the cell again.
    answer = grading.grade_request({**asked, "evaluation": "gone", "run_id": "r1"}, lambda: store)
    assert answer == {"ok": True, "output": None, "message": "kept in the run store; run the cell again to draw it"}
    assert store.grades == [("r1", False, "too short")]
    assert grading.grade_request({**asked, "evaluation": "gone"}, lambda: None)["ok"] is False


def test_a_grade_in_a_later_cell_is_written_into_the_saved_matrix(tmp_path, monkeypatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    with StubServer(responder=answering(capital_of)) as server:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source) for source in (
            f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}\nrows = {CAPITALS!r}",
            "%%compare openai:m --over rows --assert 'contains:{{ row.capital }}' -o ev\nCapital of {{ row.country }}?",
            "ev.grade(0, 'openai:m', False, 'says more than asked')",
            "%agent grade 1 openai:m pass")]
        NotebookClient(nb, timeout=90, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    (output,) = [o for o in nb.cells[1].outputs if MIME_TYPE in o.get("data", {})]
    results = output["data"][MIME_TYPE]["results"]
    assert [(r["human"], r["human_note"]) for r in results] == [(False, "says more than asked"), (True, ""), (None, "")]
    assert "human ✗" in output["data"]["text/html"] and "says more than asked" in output["data"]["text/html"]
    assert "(human ✓)" in output["data"]["text/markdown"]
    assert "graded" not in evaluation_text(output["data"][MIME_TYPE])  # the text keeps to the figures
