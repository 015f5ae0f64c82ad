"""``ipyagent eval NOTEBOOK``: notebooks/evaluate.ipynb run headless from its cassettes (one run shared by the
assertions on its exit code, JUnit, JSON and Markdown; a second from a copy whose cell has its own
``--gate``, from the first run's store), a notebook whose cell raises, bad arguments; and without a
kernel, the gates, the parameters cell and the JUnit verdicts of one (row, column)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree as ET

import nbformat
import pytest

from ipyagent.notebook.cli import main
from ipyagent.notebook.cli.collect import Found, uncollected
from ipyagent.notebook.cli.gates import check, check_all, parse_gate
from ipyagent.notebook.cli.reports import comparison_cases, evaluation_cases, junit, report_json
from ipyagent.memory import STORE_ENV, RunStore, StoreError
from ipyagent.notebook.cli.run import check_store, client_class, inject_parameters, kernel_env

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "evaluate.ipynb"
CASSETTES = sorted((ROOT / "notebooks").glob("evaluate-*.cassette.jsonl"))
SCRIPT = Path(sys.executable).parent / "ipyagent"  # the console script of pyproject's [project.scripts]
ROWS, COLUMNS = 20, 4  # evaluate.ipynb: 20 countries x 2 providers x 2 prompt variants


def _run(*args: str | Path, module: bool = False, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ipyagent"] if module else [str(SCRIPT)]
    env = {**{k: v for k, v in os.environ.items() if k != "IPYAGENT_RUN_STORE"}, **(env or {})}
    return subprocess.run([*command, "eval", *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> SimpleNamespace:
    """evaluate.ipynb run once with ``--gate 'pass_rate>=0.5'`` and every report (its run store fresh)."""
    out = tmp_path_factory.mktemp("eval")
    done = _run(NOTEBOOK, "--replay", "--store", out / "runs.sqlite", "--gate", "pass_rate>=0.5",
                "--junit", out / "out.xml", "--json", out / "out.json", "--markdown", out / "summary.md",
                "-o", out / "executed.ipynb")
    return SimpleNamespace(done=done, out=out, report=json.loads((out / "out.json").read_text()))


@pytest.mark.notebook
def test_the_evaluate_notebook_passes_a_low_gate_and_reports_every_row_by_column(evaluated) -> None:
    done, report = evaluated.done, evaluated.report
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert [e["name"] for e in report["evaluations"]] == ["ev", "by_name"]
    assert report["exit_code"] == 0 and report["passed"]
    assert len(report["gates"]) == 2 * COLUMNS and all(g["passed"] for g in report["gates"])
    terse = next(g for g in report["gates"] if g["evaluation"] == "ev" and g["column"] == "openai:gpt-6-luna/terse")
    assert terse["value"] == pytest.approx(50 / 60)
    # The store given is the one used: a fresh store, so the first matrix ran every request anew.
    assert "from the cache" not in report["evaluations"][0]["headline"]
    # The terminal summary: pass rate with its interval, verdicts against the baseline, cost; progress on stderr.
    assert "83% (72%–91%)" in done.stdout and "better by 15 points" in done.stdout and "$0.0154" in done.stdout
    assert "cell 6 %%compare" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"ipyagent eval: {2 * COLUMNS} gate checks passed"
    # The executed notebook is saved, with the matrix's output.
    executed = nbformat.read(evaluated.out / "executed.ipynb", as_version=4)
    assert any("application/vnd.ipyagent.evaluation+json" in o.get("data", {}) for o in executed.cells[5].outputs)


@pytest.mark.notebook
def test_the_junit_file_has_one_case_per_row_by_column_with_the_reasons(evaluated) -> None:
    root = ET.parse(evaluated.out / "out.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["ev", "by_name"]
    for suite, evaluation in zip(suites, evaluated.report["evaluations"]):
        cases = suite.findall("testcase")
        assert len(cases) == ROWS * COLUMNS == int(suite.get("tests"))
        assert len({c.get("name") for c in cases}) == len(cases)
        assert {c.get("classname") for c in cases} == {suite.get("name")}
        failing = {(f["row"], f["column"]) for f in evaluation["failures"]}
        assert len(suite.findall("testcase/failure")) == len(failing) == int(suite.get("failures"))
    bolivia = next(c for c in suites[0] if c.get("name") == "row 13 (Bolivia) / anthropic:claude-sonnet-5-5/terse")
    (failure,) = bolivia.findall("failure")
    assert failure.get("message").startswith("0/3 passed: repeat 1: judge:")
    assert len(failure.text.splitlines()) == 3  # each repeat's reason
    markdown = (evaluated.out / "summary.md").read_text()
    assert "✅ pass\\_rate\\>=0.5" in markdown and "| anthropic:claude-sonnet-5-5/careful | 100% " in markdown


@pytest.mark.notebook
def test_a_high_gate_and_a_cells_own_gate_fail_naming_the_figure(evaluated, tmp_path) -> None:
    """A copy whose %%compare carries ``--gate '*/terse:pass_rate>=0.9'``, run with ``python -m ipyagent``
    on the first run's store: every request served from it."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first, rest = nb.cells[5].source.split("\n", 1)
    nb.cells[5].source = f"{first} --gate '*/terse:pass_rate>=0.9'\n{rest}"
    nbformat.write(nb, tmp_path / "gated.ipynb")
    for cassette in CASSETTES:
        (tmp_path / cassette.name).symlink_to(cassette)
    done = _run(tmp_path / "gated.ipynb", "--replay", "--store", evaluated.out / "runs.sqlite",
                "--gate", "pass_rate>=0.99", "--json", tmp_path / "out.json", module=True)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    assert "(240 from the cache)" in report["evaluations"][0]["headline"]
    failed = {(g["gate"], g["evaluation"], g["column"]) for g in report["gates"] if not g["passed"]}
    assert failed == {("pass_rate>=0.99", name, column) for name in ("ev", "by_name") for column in (
        "openai:gpt-6-luna/terse", "openai:gpt-6-luna/careful", "anthropic:claude-sonnet-5-5/terse")} | {
        ("*/terse:pass_rate>=0.9", "ev", "openai:gpt-6-luna/terse"), ("*/terse:pass_rate>=0.9", "ev",
                                                                      "anthropic:claude-sonnet-5-5/terse")}
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ipyagent eval: 8 of 10 gate checks failed: pass_rate>=0.99: ev openai:gpt-6-luna/terse "
                           "83.3% (needs >= 99%)")


@pytest.mark.notebook
def test_a_cell_error_exits_2_naming_the_cell_after_the_parameters_its_secrets_redacted(tmp_path) -> None:
    """The cell's exception quotes a secret of the environment and a key-shaped string: the last line,
    every report and the saved notebook's outputs have neither."""
    secret, key_shaped = "zz_EvalCli_Secret4242", "sk-proj-" + "K" * 24
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# a failing notebook"), nbformat.v4.new_code_cell("divisor = 1"),
                nbformat.v4.new_code_cell("import os, sys\nvalue = 10 / divisor\n"  # the kernel's own stderr too
                                          "print('kernel says', os.environ['EVAL_CLI_API_KEY'], file=sys.__stderr__)"),
                nbformat.v4.new_code_cell("raise ValueError(f'stopped at {value} ' + os.environ['EVAL_CLI_API_KEY']"
                                          " + ' sk-proj-' + 'K' * 24)\n"),
                nbformat.v4.new_code_cell("print('never')")]
    nb.cells[1].metadata["tags"] = ["parameters"]
    nbformat.write(nb, tmp_path / "fails.ipynb")
    reports = [tmp_path / name for name in ("out.ipynb", "r.json", "r.xml", "r.md")]
    done = _run(tmp_path / "fails.ipynb", "-p", "divisor=4", "--output", reports[0], "--json", reports[1],
                "--junit", reports[2], "--markdown", reports[3], "--gate", "pass_rate>=0.5",
                env={"EVAL_CLI_API_KEY": secret})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "ipyagent eval: fails.ipynb did not run to its end: cell 4: ValueError: stopped at 2.5 [redacted] [redacted]")
    for text in [done.stdout, done.stderr, *(path.read_text() for path in reports)]:
        assert secret not in text and secret.replace("_", "\\_") not in text and key_shaped not in text
    assert "stopped at 2.5 \\[redacted\\] \\[redacted\\]" in reports[3].read_text()  # Markdown-escaped
    assert "kernel says [redacted]\n" in done.stderr
    report = json.loads(reports[1].read_text())  # the gate listed, unchecked; nothing says "passed"
    assert report["exit_code"] == 2 and report["passed"] is False
    assert [g["line"] for g in report["gates"]] == ["pass_rate>=0.5: not checked: the notebook did not run to its end"]
    junit = ET.parse(reports[2]).getroot()
    assert junit.get("errors") == "1" and junit.find("testsuite").get("name") == "fails.ipynb"
    assert junit.find("testsuite/testcase/error").get("message") == "cell 4: ValueError: stopped at 2.5 [redacted] " \
        "[redacted]"
    executed = nbformat.read(reports[0], as_version=4)  # saved as far as it ran
    assert executed.cells[2].source.startswith("# Parameters") and executed.cells[5].outputs == []
    assert executed.cells[4].outputs[0]["evalue"] == "stopped at 2.5 [redacted] [redacted]"


@pytest.mark.parametrize(("argv", "says"), [
    (["eval", "no-such.ipynb"], "ipyagent eval: no-such.ipynb: no such notebook"),
    (["eval", str(NOTEBOOK), "--gate", "speed>=3"], "ipyagent eval: gate 'speed>=3': unknown metric 'speed'; one of"),
    (["eval", str(NOTEBOOK), "--gate", "pass_rate>=high"], "ipyagent eval: gate 'pass_rate>=high': 'high' is not a"),
    (["eval", str(NOTEBOOK), "--gate", "pass_rate>=nan"], "ipyagent eval: gate 'pass_rate>=nan': 'nan' is not a fini"),
    (["eval", str(NOTEBOOK), "--gate", "verdict!=wrose"], "ipyagent eval: gate 'verdict!=wrose': 'wrose' is not a "
     "verdict; one of better, worse, no significant difference, baseline"),
    (["eval", str(NOTEBOOK), "--gate", "cost<=inf"], "ipyagent eval: gate 'cost<=inf': 'inf' is not a finite"),
    (["eval", str(NOTEBOOK), "--timeout", "nan"], "ipyagent eval: --timeout must be a number of seconds more than 0, "
     "not nan"),
    (["eval", str(NOTEBOOK), "-p", "1x=2"], "ipyagent eval: -p '1x=2': write NAME=VALUE"),
    (["eval", str(NOTEBOOK), "--no-such-option"], "ipyagent eval: unrecognized arguments: --no-such-option"),
    (["evaluate", "x.ipynb"], "ipyagent: unknown command 'evaluate'"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, says, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(says), err


def test_a_bad_arguments_line_is_redacted(capsys) -> None:
    assert main(["eval", "sk-proj-" + "K" * 24 + ".ipynb"]) == 2
    assert capsys.readouterr().err == "ipyagent eval: [redacted].ipynb: no such notebook\n"


@pytest.mark.parametrize("option", ["--json", "--junit", "--markdown", "-o"])
def test_a_report_path_that_cannot_be_written_is_one_line_before_the_notebook_runs(option, tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    monkeypatch.setattr("ipyagent.notebook.cli.run.execute", lambda *a, **k: pytest.fail("the notebook ran"))
    (tmp_path / "a-file").write_text("")
    for path, says in ((tmp_path, "is a folder; give a file in it"),
                       (tmp_path / "a-file" / "report", "its folder cannot be made (")):
        assert main(["eval", str(NOTEBOOK), option, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ipyagent eval: {option} {path}: {says}") and len(err.strip().splitlines()) == 1, err
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # a folder this user may not write in
    report = tmp_path / "report"
    assert main(["eval", str(NOTEBOOK), option, str(report)]) == 2
    assert capsys.readouterr().err.startswith(f"ipyagent eval: {option} {report}: cannot be written here")


@pytest.mark.parametrize("broken", ["not SQLite", "truncated"])
def test_a_store_that_cannot_be_opened_is_one_line_before_the_notebook_runs(broken, tmp_path, capsys,
                                                                            monkeypatch) -> None:
    """The kernel would turn it off (its line only in a cell's output) and pay for every run again."""
    monkeypatch.setattr("ipyagent.notebook.cli.run.execute", lambda *a, **k: pytest.fail("the notebook ran"))
    store = tmp_path / "runs.sqlite"
    if broken == "truncated":  # as a broken CI cache restore leaves it
        RunStore(tmp_path / "whole.sqlite").close()
        store.write_bytes((tmp_path / "whole.sqlite").read_bytes()[:8192])
    else:
        store.write_text("root:x:0:0:root:/root:/bin/sh\n")
    before = store.read_bytes()
    assert main(["eval", str(NOTEBOOK), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ipyagent eval: cannot open the run store {str(store)!r}: ") and len(err.splitlines()) == 1
    assert err.endswith("; give --store another file (or off: no store)\n") and store.read_bytes() == before


def test_the_store_checked_is_the_one_the_kernel_opens(tmp_path) -> None:
    check_store({STORE_ENV: "off"}, tmp_path)
    check_store({STORE_ENV: "postgresql://u@127.0.0.1:9/none"}, tmp_path)  # checked when the kernel connects
    assert list(tmp_path.iterdir()) == []
    check_store({}, tmp_path)  # the kernel's default, in its working folder
    check_store({STORE_ENV: "sub/runs.sqlite"}, tmp_path)
    assert (tmp_path / ".ipyagent" / "runs.sqlite").is_file() and (tmp_path / "sub" / "runs.sqlite").is_file()
    (tmp_path / "bad.sqlite").write_text("not a store")
    with pytest.raises(StoreError, match="bad.sqlite"):
        check_store({"IPYAGENT_STORE": "bad.sqlite"}, tmp_path)


def test_a_cell_whose_source_is_not_text_is_one_line(tmp_path, capsys) -> None:
    cell = {"cell_type": "code", "source": 5, "metadata": {}, "outputs": [], "execution_count": None}
    (tmp_path / "odd.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                    "nbformat_minor": 5}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nbformat's own warning (no cell id) would be a second line
        assert main(["eval", str(tmp_path / "odd.ipynb")]) == 2
    err = capsys.readouterr().err
    says = "cell 1 cannot run: its source is not text (a string or a list of strings)"
    assert err == f"ipyagent eval: {tmp_path / 'odd.ipynb'}: {says}\n"


def test_a_notebook_nbformat_cannot_read_is_one_line(tmp_path, capsys) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert main(["eval", str(tmp_path / "broken.ipynb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ipyagent eval: ") and "is not a notebook nbformat can read" in err
    assert len(err.strip().splitlines()) == 1


def test_importing_ipyagent_or_its_cli_loads_no_nbclient() -> None:
    code = ("import sys, ipyagent, ipyagent.notebook.cli; "
            "print(sorted(m for m in ('nbclient', 'nbformat', 'rich') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


DOC = {"providers": ["p:m"], "aliases": {"p:m": "small"}, "columns": ["p:m/a", "p:m/b"], "repeat": 1, "total": 2,
       "summary": [{"column": "p:m/a", "pass_rate": 0.9, "cost": None, "verdict": "baseline"},
                   {"column": "p:m/b", "pass_rate": 0.5, "cost": 0.25, "verdict": "worse"}], "results": []}


@pytest.mark.parametrize(("text", "passed"), [
    ("pass_rate>=0.9", [True, False]), ("pass_rate>0.9", [False, False]), ("pass_rate >= 50%", [True, True]),
    ("small/b:pass_rate>=0.9", [False]), ("p:m/a:pass_rate>=0.9", [True]), ("*/b:pass_rate<0.6", [True]),
    ("cost<=1", [False, True]),  # an unknown cost meets no gate
    ("verdict!=worse", [True, False]), ("verdict==baseline", [True, False]),
])
def test_a_gate_reads_the_summary_of_the_columns_it_names(text, passed) -> None:
    assert [r.passed for r in check(parse_gate(text), "ev", DOC)] == passed


def test_a_gate_may_name_an_evaluation_or_one_of_its_columns() -> None:
    other = {**DOC, "summary": [{"column": "p:m/a", "pass_rate": 0.1}, {"column": "p:m/b", "pass_rate": 0.1}]}
    evaluations = [("ev", DOC, [], 4), ("cell 9", other, [], 9)]

    def checked(text: str) -> list[tuple[str, str, bool]]:
        return [(r.evaluation, r.column, r.passed) for r in check_all([parse_gate(text)], evaluations)]

    assert checked("ev:pass_rate>=0.5") == [("ev", "small/a", True), ("ev", "small/b", True)]
    assert checked("cell 9:pass_rate>=0.5") == [("cell 9", "small/a", False), ("cell 9", "small/b", False)]
    assert checked("ev:small/a:pass_rate>=0.5") == [("ev", "small/a", True)]
    assert checked("small/a:pass_rate>=0.5") == [("ev", "small/a", True), ("cell 9", "small/a", False)]
    # ``cell N`` names an evaluation that has an -o name too, as the summary's header "ev (cell 4)" says.
    assert checked("cell 4:pass_rate>=0.5") == [("ev", "small/a", True), ("ev", "small/b", True)]
    assert checked("cell 4:small/b:pass_rate>=0.5") == [("ev", "small/b", True)]


def test_a_gate_naming_no_column_or_no_evaluation_fails_saying_so() -> None:
    (missing,) = check_all([parse_gate("big:pass_rate>=0.1")], [("ev", DOC, [], 4)])
    assert not missing.passed and missing.line() == "big:pass_rate>=0.1: no evaluation or column is named 'big'"
    (none,) = check_all([parse_gate("pass_rate>=0.1")], [])
    assert not none.passed and none.line() == "pass_rate>=0.1: the notebook ran no evaluation"
    (own,) = check_all([], [("ev", DOC, [parse_gate("small/b:pass_rate>=0.9")], 4)])
    assert own.line() == "small/b:pass_rate>=0.9: ev small/b 50% (needs >= 90%)"
    with pytest.raises(ValueError, match="a verdict is compared with == or !="):
        parse_gate("verdict>=better")


def test_reports_of_a_notebook_that_did_not_run_to_its_end_do_not_pass() -> None:
    report = json.loads(report_json([], [], notebook="x.ipynb", exit_code=2))  # no gate, no evaluation
    assert report["passed"] is False
    (suite,) = ET.fromstring(junit([], "x.ipynb", failure="cell 2: ValueError: boom")).findall("testsuite")
    assert suite.get("errors") == "1" and suite.find("testcase/error").get("message") == "cell 2: ValueError: boom"
    assert ET.fromstring(junit([], "x.ipynb")).findall("testsuite") == []


def test_a_background_evaluation_left_as_its_live_view_is_named_not_silently_missing() -> None:
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "<LiveWidget>"}
    live = nbformat.v4.new_output("display_data", data=widget, metadata={"ipyagent": {"live": True}})
    saved = nbformat.v4.new_output("display_data", data={"application/vnd.ipyagent.evaluation+json": {}})
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%compare p:m --over rows --background -o ev", outputs=[live]),
                nbformat.v4.new_code_cell("%%compare p:m --over rows", outputs=[live, saved]),  # replaced in time
                nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output("display_data", data=widget)])]
    (line,) = uncollected(nb, lambda index: index + 1)
    assert line.startswith("cell 1 ran in the background (--background) and had not ended when the notebook did")


def test_a_display_update_for_an_ended_cell_replaces_its_live_view() -> None:
    """A --background evaluation ends while a later cell (``ev.wait()``) runs: its saved output, sent to
    the first cell, replaces the live view there, so it is collected."""
    import asyncio

    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "<LiveWidget>"}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%compare p:m --over rows --background -o ev", outputs=[
        nbformat.v4.new_output("display_data", data=widget, metadata={"ipyagent": {"live": True}})]),
        nbformat.v4.new_code_cell("ev.wait()")]
    saved = {"application/vnd.ipyagent.evaluation+json": {"id": "e1"}, "text/plain": "ev"}

    def message(kind: str, parent: str, content: dict) -> dict:
        return {"msg_type": kind, "header": {"msg_type": kind}, "parent_header": {"msg_id": parent},
                "content": content, "metadata": {}}

    messages = iter([message("update_display_data", "cell-1", {"data": saved, "metadata": {},
                                                                "transient": {"display_id": "d1"}}),
                     message("status", "cell-2", {"execution_state": "idle"})])
    client = client_class()(nb)
    client._display_id_map = {"d1": {0: [0]}}  # as nbclient recorded the live view's display
    nb.cells[1].metadata["execution"] = {}  # as nbclient starts a cell
    client.kc = SimpleNamespace(iopub_channel=SimpleNamespace(get_msg=lambda timeout: next(messages)))
    asyncio.run(client._async_poll_output_msg("cell-2", nb.cells[1], 1))
    assert nb.cells[0].outputs[0]["data"] == saved and uncollected(nb, lambda index: index + 1) == []


def test_the_command_says_which_cell_ran_in_the_background(tmp_path, capsys, monkeypatch) -> None:
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "<LiveWidget>"}
    live = nbformat.v4.new_output("display_data", data=widget, metadata={"ipyagent": {"live": True}})

    def execute(nb, *args, **kwargs) -> None:  # what nbclient leaves of a --background %%compare
        nb.cells[0].outputs = [live]

    monkeypatch.setattr("ipyagent.notebook.cli.run.execute", execute)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%compare p:m --over rows --background -o ev\nSay hi")]
    nbformat.write(nb, tmp_path / "bg.ipynb")
    assert main(["eval", str(tmp_path / "bg.ipynb"), "--store", "off", "--gate", "pass_rate>=0.8"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("ipyagent eval: cell 1 ran in the background (--background)")
    assert err[-1] == "ipyagent eval: 1 of 1 gate checks failed: pass_rate>=0.8: the notebook ran no evaluation"


def test_parameters_go_after_the_parameters_cell_else_at_the_top_replacing_an_injected_one() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_code_cell("n = 1"), nbformat.v4.new_code_cell("")]
    assert inject_parameters(nb, {}) is None and len(nb.cells) == 3
    assert inject_parameters(nb, {"n": 2}) == 0 and nb.cells[0].source.endswith("n = 2\n")
    nb.cells[2].metadata["tags"] = ["parameters"]
    assert inject_parameters(nb, {"n": 3, "name": "x y"}) == 2  # the first injected cell removed, then after tags
    assert [c.source for c in nb.cells][:2] == ["a = 1", "n = 1"]
    assert nb.cells[2].source.endswith("n = 3\nname = 'x y'\n") and nb.cells[2].metadata["tags"] == [
        "injected-parameters"]


def test_replay_takes_every_provider_key_out_of_the_kernels_environment(monkeypatch, tmp_path) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GROQ_API_KEY"):
        monkeypatch.setenv(name, "sk-test")
    monkeypatch.setenv("PATH_LIKE", "kept")
    env = kernel_env(replay=True, store=str(tmp_path / "r.sqlite"))
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GROQ_API_KEY"} & set(env)
    assert env["PATH_LIKE"] == "kept" and env["IPYAGENT_RUN_STORE"] == str(tmp_path / "r.sqlite")
    assert kernel_env(replay=False, store="off")["OPENAI_API_KEY"] == "sk-test"
    assert kernel_env(replay=False, store="off")["IPYAGENT_RUN_STORE"] == "off"


def _result(row: int, status: str = "ok", passed: bool = True, reason: str = "no") -> dict:
    outcomes = [{"name": "contains:x", "passed": passed, "reason": None if passed else reason}]
    return {"row": row, "column": "p:m/a", "provider": "p:m", "status": status, "passed": passed and status == "ok",
            "outcomes": outcomes, "fields": {"q": f"q{row}"}, "error": "boom" if status == "failed" else None,
            "error_type": "server" if status == "failed" else None, "total_s": 1.0}


def test_a_row_by_column_case_is_a_pass_failure_error_or_skipped() -> None:
    doc = {**DOC, "columns": ["p:m/a"], "results": [
        _result(0), _result(1, passed=False, reason="has no x"), _result(2, status="failed"),
        _result(3, status="skipped")]}
    suite = evaluation_cases(Found("evaluation", "ev", 6, doc))
    kinds = {c.get("name"): [child.tag for child in c] for c in suite}
    assert kinds == {"row 0 (q0) / small/a": [], "row 1 (q1) / small/a": ["failure"],
                     "row 2 (q2) / small/a": ["error"], "row 3 (q3) / small/a": ["skipped"]}
    assert suite.find("testcase/failure").get("message") == "contains:x: has no x"
    assert suite.find("testcase/error").get("message") == "server: boom"
    assert [suite.get(key) for key in ("tests", "failures", "errors", "skipped")] == ["4", "1", "1", "1"]


def test_a_comparison_is_a_case_per_provider_and_run_an_error_when_it_failed() -> None:
    def entry(index: int, run: int, status: str) -> dict:
        error = {"type": "server", "message": "boom"} if status == "failed" else None
        return {"index": index, "run": run, "transcript": {"provider": f"p:{index}", "status": status,
                                                          "timings": {"total_s": 2.0}, "error": error}}

    doc = {"runs": 2, "entries": [entry(0, 0, "completed"), entry(0, 1, "failed"), entry(1, 0, "completed"),
                                  entry(1, 1, "completed")]}
    suite = comparison_cases(Found("comparison", "cell 3", 3, doc))
    assert [c.get("name") for c in suite] == ["p:0 run 1", "p:0 run 2", "p:1 run 1", "p:1 run 2"]
    assert [[child.get("message") for child in c] for c in suite] == [[], ["server: boom"], [], []]
    assert (suite.get("tests"), suite.get("errors")) == ("4", "1")
