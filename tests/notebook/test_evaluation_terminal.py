"""Terminal IPython at 100 columns: ``%%compare --over`` shows its matrix one line per row (the
row's key, ✓/✗ per column with the answer's first words) and every failure with its reason,
and ``%%compare``'s table keeps its error column; nothing is wider than the screen (read back
from an emulated VT100 screen, pyte)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pyte
import pytest
from rich.cells import cell_len

from ..support.evaluation import answering, last_user_text
from ..support.shell import KEY_VARS
from ..support.stub_server import Reply, StubServer, openai_text_reply
from ..support.views import Tty

COLUMNS = 100
SGR = re.compile(r"\x1b\[[0-9;]*m")
ROWS = [{"country": "France", "capital": "Paris"}, {"country": "Japan", "capital": "Tokyo"},
        {"country": "Australia", "capital": "Canberra"}, {"country": "Canada", "capital": "Ottawa"},
        {"country": "Bolivia", "capital": "Sucre"}]


@pytest.fixture(autouse=True)
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))  # shutil.get_terminal_size reads these first
    monkeypatch.setenv("LINES", "60")
    monkeypatch.delenv("NO_COLOR", raising=False)
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def on_a_terminal(run: Any) -> str:
    """What `run()` writes to a stdout that is a terminal."""
    saved, sys.stdout = sys.stdout, Tty()
    try:
        run()
        return sys.stdout.getvalue()
    finally:
        sys.stdout = saved


def screen(raw: str) -> list[str]:
    """The non-blank rows of `raw` on a `COLUMNS`-wide VT100 screen (pyte)."""
    shown = pyte.Screen(COLUMNS, 200)
    pyte.Stream(shown).feed(raw.replace("\n", "\r\n"))  # a terminal's line discipline maps \n to \r\n
    return [line.rstrip() for line in shown.display if line.strip()]


def fits(raw: str) -> None:
    """No line the terminal would wrap: each written line is at most `COLUMNS` cells (a ``\\r`` starts
    it again at the left: the progress line rewritten in place)."""
    lines = re.split(r"[\r\n]", raw)
    widths = [cell_len(SGR.sub("", line)) for line in lines]
    assert max(widths) <= COLUMNS, [line for line in lines if cell_len(SGR.sub("", line)) > COLUMNS]


def wrong_for_some(question: str) -> str:
    row = next(r for r in ROWS if r["country"] in question)
    if row["country"] in ("Australia", "Bolivia"):
        return f"I think it is Sydney, the largest city of {row['country']} by far."
    return f"The capital of {row['country']} is {row['capital']}."


def failing_on_canada(body: dict[str, Any]) -> Reply:
    if "Canada" in last_user_text(body):
        error = {"error": {"message": "The server had an error processing your request.", "type": "server_error"}}
        return Reply(status=400, headers={"Content-Type": "application/json"}, pieces=[json.dumps(error).encode()])
    capital = next(r["capital"] for r in ROWS if r["country"] in last_user_text(body))
    return openai_text_reply(f"The capital of it is {capital}.")


def test_the_matrix_shows_every_row_and_each_failure_with_its_reason(ip) -> None:
    with StubServer(responder=failing_on_canada) as a, StubServer(responder=answering(wrong_for_some)) as b:
        ip.run_line_magic("provider", f"openai:gpt-4.1-mini --base-url {a.url}/v1")
        ip.run_line_magic("provider", f"--alias small openai:gpt-4.1-nano --base-url {b.url}/v1")
        ip.user_ns["rows"] = ROWS
        raw = on_a_terminal(lambda: ip.run_cell_magic(
            "compare", "openai:gpt-4.1-mini small --over rows --assert 'icontains:{{ row.capital }}'",
            "What is the capital of {{ row.country }}? One short sentence."))
    fits(raw)
    lines = screen(raw)
    head = next(n for n, line in enumerate(lines) if re.match(r"#\s+country\s+capital\s", line))
    assert "openai:gpt-4.1-mini 80%" in lines[head] and "small 60% (openai:gpt-4.1-nano)" in lines[head]
    matrix = lines[head + 2:head + 7]  # under the header's rule: one line per row
    marks = {"France": "✓✓", "Japan": "✓✓", "Australia": "✓✗", "Canada": "!✓", "Bolivia": "✓✗"}
    for n, (row, line) in enumerate(zip(ROWS, matrix)):
        assert re.match(rf"{n}\s+{row['country']}\s+{row['capital']}\s", line), line
        assert "".join(re.findall(r"[✓✗!]", line)) == marks[row["country"]], line
    assert "✓ The capital of it is Paris." in matrix[0] and "✗ I think it is Sydney" in matrix[2]
    failures = lines[lines.index("3 did not pass:") + 1:]
    said = " ".join(" ".join(failures).split())
    check = "icontains:{{ row.capital }}: the answer does not contain (any case)"
    assert f"row 2 (Australia) · small {check} 'Canberra'" in said
    assert "row 3 (Canada) · openai:gpt-4.1-mini invalid_request: openai returned HTTP 400" in said
    assert f"row 4 (Bolivia) · small {check} 'Sucre'" in said
    assert "\x1b[32m✓" in raw and "\x1b[31m✗" in raw  # the marks coloured too


def test_the_compare_table_keeps_its_error_column(ip) -> None:
    with StubServer(responder=answering(lambda q: "A kernel runs the notebook's code.")) as a, \
            StubServer(responder=failing_on_canada) as b:
        ip.run_line_magic("provider", f"openai:gpt-4.1-mini --base-url {a.url}/v1")
        ip.run_line_magic("provider", f"--alias broken openai:gpt-4.1-nano --base-url {b.url}/v1")
        raw = on_a_terminal(lambda: ip.run_cell_magic("compare", "openai:gpt-4.1-mini broken",
                                                      "Canada: what is a kernel?"))
    fits(raw)
    lines = screen(raw)
    head = next(n for n, line in enumerate(lines) if line.lstrip().startswith("provider"))
    assert lines[head].rstrip().endswith("error")
    said = " ".join(" ".join(lines[head:]).split())
    assert "invalid_request: openai returned HTTP 400: The server had an error processing your request." in said


def test_no_color_draws_the_same_matrix_without_escape_codes(ip, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    with StubServer(responder=answering(wrong_for_some)) as a:
        ip.run_line_magic("provider", f"--alias small openai:gpt-4.1-nano --base-url {a.url}/v1")
        ip.user_ns["rows"] = ROWS[:3]
        raw = on_a_terminal(lambda: ip.run_cell_magic(
            "compare", "small --over rows --assert 'icontains:{{ row.capital }}' --no-cache",
            "Capital of {{ row.country }}?"))
    fits(raw)
    assert "\x1b" not in raw
    lines = screen(raw)
    assert any(re.match(r"2\s+Australia\s+Canberra\s+✗ I think it is Sydney", line) for line in lines)
    assert "1 did not pass:" in lines
