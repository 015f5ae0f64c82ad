"""JupyterLab in headless Chromium: the live matrix of a running ``%%compare --over`` pages from the
kernel (issue 33, item 2): next, previous and a filter show the right rows while the evaluation
runs, and a grade clicked on page 2 lands in the run store. The last rows' replies are held by an
event, so the evaluation is live for as long as the test needs."""

from __future__ import annotations

import threading

import pytest

from ..support.evaluation import last_user_text
from ..support.stub_server import openai_text_reply
from .lab import write_notebook

pytestmark = pytest.mark.browser

ROWS = 300
HELD = 290  # rows from here on wait for the gate: the evaluation stays live


def _rows_shown(view) -> list[int]:
    return [int(n) for n in view.locator(".ipyagent-eval-matrix tbody tr td:first-child").all_inner_texts()]


def test_the_live_matrix_pages_forward_back_and_by_filter_and_grades_on_page_2(lab, model_server):
    gate = threading.Event()

    def reply(body):  # row n answers at once (every tenth one wrongly), from HELD on after the gate
        n = int(last_user_text(body).split()[2])
        answer = f"It is {n * 2}." if n % 10 != 3 else "No idea."
        return openai_text_reply(answer, **({} if n < HELD else {"hold_after": 1, "release": gate}))

    write_notebook(lab.root / "live_pages.ipynb", "%load_ext ipyagent",
                   f"rows = [{{'n': n, 'want': f'It is {{n * 2}}.'}} for n in range({ROWS})]",
                   "%%compare openai:gpt-6-luna --over rows --assert 'contains:{{ row.want }}' -o ev\n"
                   "What is {{ row.n }} + {{ row.n }}?",
                   "import ipyagent\nstored = ipyagent.load_evaluation(ev.id).to_dataframe()\n"
                   "print(stored.dropna(subset=['human'])[['row', 'human', 'human_note']].to_dict('records'))")
    model_server.responder = reply
    try:
        lab.open("live_pages.ipynb")
        lab.command("notebook:run-all-cells")
        view = lab.cell(2).locator(".ipyagent-eval-live")
        view.locator(".ipyagent-eval-progress", has_text=f"{HELD} / {ROWS} runs").wait_for(timeout=120000)
        assert _rows_shown(view) == list(range(50))
        place = view.locator(".ipyagent-eval-pager-place")
        assert place.inner_text() == f"rows 1–50 of {ROWS}"
        # Next: the kernel sends rows 50-99, and only those are drawn.
        view.locator(".ipyagent-eval-pager button", has_text="next").click()
        place.get_by_text(f"rows 51–100 of {ROWS}").wait_for(timeout=20000)
        assert _rows_shown(view) == list(range(50, 100))
        # A grade on page 2: row 60, clicked open, graded fail.
        cell = view.locator(".ipyagent-eval-matrix tbody tr").nth(10).locator("td").nth(3)
        cell.locator("summary").click()
        cell.locator("button", has_text="✗ fail").click()
        graded = view.locator(".ipyagent-eval-matrix tbody tr").nth(10).locator("td").nth(3)
        graded.locator(".ipyagent-eval-human-fail").wait_for(timeout=20000)  # the kernel sent the page again
        lab.screenshot(lab.cell(2), "evaluation-live-page-2.png")
        # Previous, then failures only: the rows that fail, from the kernel (29 of them, one page).
        view.locator(".ipyagent-eval-pager button", has_text="previous").click()
        place.get_by_text(f"rows 1–50 of {ROWS}").wait_for(timeout=20000)
        assert _rows_shown(view) == list(range(50))
        view.locator("button[data-filter='failed']").click()
        failing = [n for n in range(HELD) if n % 10 == 3]  # a grade is not the check's verdict: 60 is not here
        place.get_by_text(f"rows 1–{len(failing)} of {len(failing)}").wait_for(timeout=20000)
        assert _rows_shown(view) == failing
        assert view.locator(".ipyagent-eval-fail").count() == len(failing)
        lab.screenshot(lab.cell(2), "evaluation-live-failures.png")
        gate.set()
        # The end: the saved matrix replaces the live one; the grade is in the run store.
        printed = lab.cell(3).locator(".jp-OutputArea-output")
        printed.wait_for(timeout=120000)
        assert printed.inner_text().strip() == "[{'row': 60, 'human': False, 'human_note': ''}]"
        lab.cell(2).locator(".jp-ipyagent-renderer .ipyagent-evaluation").wait_for(timeout=30000)
        assert lab.cell(2).locator(".ipyagent-eval-live").count() == 0
    finally:
        gate.set()
        model_server.responder = None
