"""The notebook as context: summaries for a model, ``%agent fix`` / ``--error``, ``--with``,
``--cells``, ``In`` / ``Out``, ``--code`` and ``%agent inspect``, in an in-process IPython
shell against a local server (the kernel side is in test_context_notebook.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipyagent.core.transcript import NextCell, TextPart, Transcript, TranscriptMessage
from ipyagent.memory.context import ContextBlock, variable_block
from ipyagent.memory.summarize import summarize
from ipyagent.notebook.context.code_blocks import fenced_blocks, pick_code
from ipyagent.notebook.render.transcript import to_html, to_text

from ..support.stub_server import StubServer, openai_text_reply

ANSWER = (
    "Division by zero: guard it.\n\n```python\nper_unit = [p / c for p, c in zip(prices, counts) if "
    "c]\n```\n\n```sql\nselect 1;\n```\n"
)


# -- summaries -------------------------------------------------------------------------------


def test_a_wide_long_frame_fits_the_budget_with_every_column_and_dtype() -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.random((100_000, 20)), columns=[f"feature_{i:02d}" for i in range(20)])
    df["feature_03"] = df["feature_03"].where(df["feature_03"] > 0.25)
    df["feature_07"] = df["feature_07"].round().astype("int32")
    for budget in (2000, 400):
        s = summarize(df, budget_tokens=budget)
        assert s.tokens <= budget
        assert "100,000 rows × 20 columns" in s.text
        for name, dtype in df.dtypes.items():
            assert f"| {name} | {dtype} |" in s.text
    null_line = next(line for line in summarize(df).text.splitlines() if line.startswith("| feature_03 |"))
    assert null_line.endswith(f"| {int(df['feature_03'].isna().sum()):,} |")
    full = summarize(df, budget_tokens=2000)
    assert "first 5 of 100,000 rows" in full.text and not full.truncated
    tight = summarize(df, budget_tokens=400)  # the head table loses columns first, and says so
    assert tight.truncated and "of 20 columns" in tight.text


def test_a_frame_with_more_columns_than_the_budget_says_how_many_were_left_out() -> None:
    pd = pytest.importorskip("pandas")
    s = summarize(pd.DataFrame({f"c{i}": [i] for i in range(2000)}), budget_tokens=300)
    assert s.tokens <= 300 and s.truncated
    assert "more columns left out (budget)" in s.text


def test_an_ndarray_is_shape_dtype_and_edge_values_without_statistics_when_huge() -> None:
    np = pytest.importorskip("numpy")
    big = np.arange(10**7, dtype=np.int64)
    s = summarize(big)
    assert s.kind == "numpy.ndarray"
    assert "shape (10,000,000), dtype int64" in s.text and "80,000,000 bytes" in s.text
    assert "[      0       1       2 ... 9999997 9999998 9999999]" in s.text
    assert "no statistics" in s.text
    small = summarize(np.array([[1.0, np.nan], [3.0, 5.0]]))
    assert "min 1.0, max 5.0, mean 3" in small.text and "1 NaN or infinite" in small.text


def test_polars_frames_lazy_frames_and_series() -> None:
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"a": [1, None, 3], "b": ["x", "y", "z"]})
    text = summarize(df).text
    assert "polars.DataFrame: 3 rows × 2 columns" in text and "| a | Int64 | 1 |" in text and "| 3 | z |" in text
    assert "not computed" in summarize(df.lazy()).text and "| b | String |" in summarize(df.lazy()).text
    assert "1 nulls" in summarize(df["a"]).text


def test_containers_are_json_cut_to_the_budget_without_serializing_everything() -> None:
    s = summarize({"ids": list(range(10**7)), "name": "run"}, budget_tokens=60)
    assert s.tokens <= 60 and s.truncated
    assert s.text.startswith("dict with 2 keys:\n{\n  \"ids\": [0, 1, 2,")
    assert "more left out" in s.text
    assert json.loads(summarize([1, "a", None, True]).text.split("\n", 1)[1]) == [1, "a", None, True]


def test_functions_classes_exceptions_and_anything_else() -> None:
    assert summarize(pick_code).text.startswith("def pick_code(")
    try:
        {}["missing"]
    except KeyError as exc:
        s = summarize(exc)
    assert (
        s.kind == "KeyError"
        and "Traceback (most recent call last)" in s.text
        and s.text.endswith("KeyError: 'missing'")
    )

    class Loud:
        def __repr__(self) -> str:
            return "x" * 100_000

    s = summarize(Loud(), budget_tokens=50)
    assert s.tokens <= 50 and s.truncated and "more characters left out" in s.text

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("nope")

    assert "repr failed: RuntimeError: nope" in summarize(Broken()).text


def test_summarizing_never_imports_pandas_polars_or_numpy() -> None:
    code = (
        "import sys\n"
        "from ipyagent.memory.summarize import summarize\n"
        "for v in ({'a': [1, 2]}, [1, 2], 'text', object(), summarize, ValueError('x'), 3.5, b'xy', {1, 2}):\n"
        "    summarize(v)\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'polars') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_context_block_names_what_it_is() -> None:
    block = variable_block("cfg", {"lr": 0.1})
    assert block.to_text().startswith('<context source="variable" name="cfg" type="dict">\n')
    assert block.to_text().endswith("</context>\n\n")
    assert block.describe()["tokens"] == block.tokens > 0
    assert 'name="a&quot;b"' in ContextBlock('a"b', "variable", "str", "x").to_text()


# -- code blocks and the transcript ---------------------------------------------------------------


def test_pick_code_takes_the_first_python_block_or_a_language_or_all() -> None:
    assert pick_code(ANSWER) == "per_unit = [p / c for p, c in zip(prices, counts) if c]"
    assert pick_code(ANSWER, "sql") == "select 1;"
    assert pick_code(ANSWER, "all") == "per_unit = [p / c for p, c in zip(prices, counts) if c]\n\nselect 1;"
    assert pick_code("no code here") is None
    assert pick_code("```\nprint(1)\n```") == "print(1)"  # unlabelled counts as Python
    assert pick_code("~~~ {.python}\nx = 1\n~~~") == "x = 1"
    assert fenced_blocks("- item\n\n  ```r\n  x <- 1\n  ```\n") == [("r", "x <- 1\n")]  # inside a list too


def test_the_saved_transcript_offers_the_code_with_insert_and_copy_buttons() -> None:
    t = Transcript(provider="openai:m", next_cell=NextCell(language="python", source="print('<b>')"))
    html = to_html(t)
    assert '<div class="ipyagent-next-cell" data-language="python">' in html
    assert '<button class="ipyagent-insert"' in html and '<button class="ipyagent-copy"' in html
    assert "print(&#x27;&lt;b&gt;&#x27;)" in html and "<b>" not in html.split("ipyagent-next-cell")[1]
    assert "[code for a new cell below: 1 lines of python]" in to_text(t)
    assert Transcript.from_json(t.to_json()).next_cell == t.next_cell


# -- magics in a shell ---------------------------------------------------------------------------


@pytest.fixture
def ip(ip: Any, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Any:
    """The shared shell, with a key, a run store of its own, and no error before the test's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-context-test")
    monkeypatch.setenv("IPYAGENT_RUN_STORE", str(tmp_path / "runs.sqlite"))
    for name in ("last_exc", "last_value", "last_type", "last_traceback"):
        monkeypatch.delattr(sys, name, raising=False)
    return ip


@pytest.fixture
def server(ip) -> Iterator[StubServer]:
    with StubServer(openai_text_reply(ANSWER)) as s:
        ip.run_line_magic("provider", f"openai:m --base-url {s.url}/v1")
        yield s


def user_text(server: StubServer, n: int = -1) -> str:
    return server.requests[n]["body"]["messages"][-1]["content"]


def run(ip, source: str):
    return ip.run_cell(source, store_history=True)


def test_fix_with_no_exception_says_so_and_sends_nothing(ip, server, capsys) -> None:
    result = run(ip, "%agent fix")
    assert isinstance(result.error_in_exec, UsageError)
    assert "no exception in this session yet" in str(result.error_in_exec)
    assert server.requests == []
    with pytest.raises(UsageError, match="no exception in this session yet"):
        ip.run_cell_magic("agent", "--error", "Why?")
    run(ip, "%agent fix")  # a usage error is not the "last exception" either
    assert server.requests == []


def test_fix_sends_type_traceback_and_the_failing_cells_source(ip, server) -> None:
    run(ip, "prices = [12.0, 15.5]\ncounts = [3, 0]")
    run(ip, "def unit(p, c):\n    return p / c")
    failing = run(ip, "per_unit = [unit(p, c) for p, c in zip(prices, counts)]")
    assert isinstance(failing.error_in_exec, ZeroDivisionError)
    run(ip, '%agent fix --code "why is it zero"')
    text = user_text(server)
    assert text.startswith(
        '<context source="error" name="error" type="ZeroDivisionError">\nZeroDivisionError: float division by zero\n'
    )
    assert (
        f"raised by cell In[{failing.execution_count}]:\n```python\nper_unit = [unit(p, c) for p, c in zip(prices, "
        "counts)]\n```"
        in text
    )
    assert "----> 2     return p / c" in text  # IPython's traceback, with its context lines
    assert f"Cell In[{failing.execution_count}], line 1" in text
    assert "\x1b[" not in text and "ipyagent" not in text.split("traceback:")[1]
    assert text.rstrip().endswith("why is it zero")
    assert "Explain the cause" in text
    assert ip.rl_next_input == "per_unit = [p / c for p, c in zip(prices, counts) if c]"  # --code: set_next_input


def test_our_own_frames_are_dropped_from_the_traceback(ip, server) -> None:
    run(
        ip,
        "from ipyagent.memory.summarize import summarize\nclass Bad:\n    def __repr__(self):\n        raise "
        "KeyError('deep')",
    )
    run(ip, "import ipyagent.memory.frames as f\nf.summarize_frame = None\nsummarize(Bad())")  # raises inside ipyagent
    run(ip, "import importlib, ipyagent.memory.frames\nimportlib.reload(ipyagent.memory.frames)")
    run(ip, "%%agent --error\nWhy?")
    tb = user_text(server).split("traceback:")[1]
    assert "summarize(Bad())" in tb and "TypeError" in tb
    assert "summarize.py" not in tb and "site-packages/ipyagent" not in tb


def test_a_syntax_error_is_the_cell_and_the_caret_without_ipythons_frames(ip, server) -> None:
    bad = run(ip, "x = (1,\ny = 2")
    assert isinstance(bad.error_before_exec, SyntaxError)
    run(ip, "%agent fix")
    text = user_text(server)
    assert f"raised by cell In[{bad.execution_count}]:\n```python\nx = (1,\ny = 2\n```" in text
    assert text.split("traceback:\n")[1].startswith(
        f"  Cell In[{bad.execution_count}], line 1\n    x = (1,\n        ^\nSyntaxError: '(' was never closed"
    )
    assert "interactiveshell.py" not in text and "compilerop.py" not in text


def test_error_in_a_template_is_the_same_context_as_text(ip, server) -> None:
    run(ip, "1 / 0")
    run(ip, "%%agent\nExplain: {{ error }}")
    text = user_text(server)
    assert text.startswith("Explain: ZeroDivisionError: division by zero\nraised by cell In[")
    assert "<context" not in text
    run(ip, "error = 'mine'")  # the user's own `error` wins
    run(ip, "%%agent\n{{ error }}")
    assert user_text(server) == "mine"


def test_with_attaches_summaries_within_the_budget(ip, server) -> None:
    pd = pytest.importorskip("pandas")
    ip.user_ns["df"] = pd.DataFrame({f"col{i}": range(1000) for i in range(40)})
    ip.user_ns["monthly"] = {"Jan": 120, "Feb": 95}
    run(ip, "%%agent --with df,monthly --context-budget 300\nWhich month sold most?")
    text = user_text(server)
    df_block, month_block, question = text.split("</context>\n\n")
    assert df_block.startswith('<context source="variable" name="df" type="pandas.DataFrame" truncated="true">')
    assert len(df_block) <= 300 * 4 + 120
    assert month_block.startswith('<context source="variable" name="monthly" type="dict">\ndict with 2 keys:')
    assert question == "Which month sold most?"
    result = run(ip, "%%agent --with nope\nx")
    assert "--with: 'nope' is not defined" in str(result.error_in_exec)
    run(ip, "%%agent --with df.columns\nx")
    assert user_text(server).startswith('<context source="variable" name="df.columns" type="pandas.Index">')
    result = run(ip, "%%agent --with df.nothing_here\nx")
    assert "--with: 'df.nothing_here': DataFrame has no attribute 'nothing_here'" in str(result.error_in_exec)
    run(ip, "%%agent\n{{ monthly | context(50) }} / {{ monthly }}")
    assert user_text(server) == "dict with 2 keys:\n{\n  \"Jan\": 120,\n  \"Feb\": 95\n} / {'Jan': 120, 'Feb': 95}"


def test_cells_sends_the_previous_sources_and_their_text_outputs(ip, server) -> None:
    first = run(ip, "monthly = {'Jan': 120, 'Feb': 95}\nprint('best:', max(monthly, key=monthly.get))")
    second = run(ip, "sum(monthly.values()) / len(monthly)")
    run(ip, "%%agent --cells 2\nWhat do these do?")
    blocks = user_text(server).split("</context>\n\n")
    assert blocks[0] == (
        f'<context source="cell" name="In[{first.execution_count}]" type="cell">\n```python\n'
        "monthly = {'Jan': 120, 'Feb': 95}\nprint('best:', max(monthly, key=monthly.get))\n```\noutput:\nbest: Jan\n"
    )
    assert blocks[1] == (f'<context source="cell" name="In[{second.execution_count}]" type="cell">\n```python\n'
                         f"sum(monthly.values()) / len(monthly)\n```\nOut[{second.execution_count}]:\nfloat: 107.5\n")
    assert blocks[2] == "What do these do?"


def test_context_blocks_never_carry_a_key(ip, server) -> None:
    ip.user_ns["settings"] = {"model": "m", "token": "sk-context-test"}
    run(ip, "import os\nprint(os.environ['OPENAI_API_KEY'])")
    run(ip, "%%agent --with settings --cells 1\nhi")
    text = user_text(server)
    assert "sk-context-test" not in text
    assert text.count("[redacted]") == 2 and "\"token\": \"[redacted]\"" in text


def test_attached_context_counts_when_old_turns_are_fitted_to_the_window(ip, server) -> None:
    run(ip, "%%agent\n" + "old words " * 400)  # a turn of about 1,000 tokens
    ip.user_ns["big"] = "z" * 20_000
    run(ip, "%%agent --context-window 3000 --context-budget 1000\nshort")
    assert len(server.requests[-1]["body"]["messages"]) == 3  # without context the old turn fits
    run(ip, "%%agent --with big --context-window 3000 --context-budget 2000\nshort")
    messages = server.requests[-1]["body"]["messages"]
    assert not any("old words" in m["content"] for m in messages)  # with ~2,000 tokens attached it does not


def test_in_and_out_in_templates_name_a_missing_cell(ip, server) -> None:
    quiet = run(ip, "x = 1")
    loud = run(ip, "41 + 1")
    run(ip, f"%%agent\n{{{{ In[{quiet.execution_count}] }}}} -> {{{{ Out[{loud.execution_count}] }}}}")
    assert user_text(server) == "x = 1 -> 42"
    sent = len(server.requests)
    result = run(ip, f"%%agent\n{{{{ Out[{quiet.execution_count}] }}}}")
    assert str(result.error_in_exec) == (
        f"Out[{quiet.execution_count}] does not exist: cell In[{quiet.execution_count}] produced "
        f"no result (it returned None or ended with ';'); use {{{{ In[{quiet.execution_count}] }}}} for its source"
    )
    result = run(ip, "%%agent\n{{ Out[9999] }}")
    assert "Out[9999] does not exist: the cells run so far are 1 to" in str(result.error_in_exec)
    assert len(server.requests) == sent


def test_code_all_and_a_missing_language(ip, server, capsys) -> None:
    run(ip, "%%agent --code all\nfix it")
    assert ip.rl_next_input.endswith("\n\nselect 1;")
    ip.rl_next_input = None
    run(ip, "%%agent --code rust\nfix it")
    assert ip.rl_next_input is None
    assert "--code: the answer has no rust code block; nothing was put in a new cell" in capsys.readouterr().err


def test_inspect_shows_each_context_block_and_its_tokens(ip, server, capsys) -> None:
    ip.user_ns["monthly"] = {"Jan": 120, "Feb": 95}
    run(ip, "1 / 0")
    run(ip, "%%agent --error --with monthly\nWhy?")
    capsys.readouterr()
    run(ip, "%agent inspect")
    out = capsys.readouterr().out
    blocks = [variable_block("monthly", ip.user_ns["monthly"])]
    assert "context: 2 blocks" in out
    assert "  error error (ZeroDivisionError): ≈" in out
    assert f"  variable monthly (dict): ≈{blocks[0].tokens:,} tokens" in out


def test_the_cell_log_keeps_a_runs_whole_answer_not_its_short_plain_text() -> None:
    """A run's saved text/plain is only its start and footer: --cells reads the answer from the
    record beside it (a transcript, or each run of a comparison)."""
    from types import SimpleNamespace

    from ipyagent.core.transcript import ComparisonEntry, ComparisonRecord
    from ipyagent.notebook.context.cell_log import CellLog
    from ipyagent.notebook.views.transcript_output import bundle, comparison_bundle

    answer = "\n".join(f"line {i} of the answer" for i in range(100))
    t = Transcript(provider="openai:m", messages=[TranscriptMessage(role="assistant", parts=[TextPart(text=answer)])])
    log = CellLog(SimpleNamespace())
    for data, want in (
        (bundle(t)[0], answer),
        (
            comparison_bundle(
                ComparisonRecord(
                    providers=["a", "b"],
                    entries=[ComparisonEntry(index=0, transcript=t), ComparisonEntry(index=1, transcript=t)],
                )
            )[0],
            answer + "\n\n" + answer,
        ),
    ):
        assert answer not in data["text/plain"]
        log._current, log._size = [], 0
        log.record_display(data)
        recorded = "".join(log._current)
        assert recorded.startswith(want + "\n") and recorded.rstrip().endswith("]")  # then the footer line
