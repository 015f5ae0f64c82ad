"""JupyterLab in headless Chromium: ``%%compare --over ... --background``'s cell keeps filling while
the cells after it run, then shows the matrix; the foreground progress line. Replies are held by
an event."""

from __future__ import annotations

import threading

import pytest

from ..support.evaluation import last_user_text
from ..support.stub_server import openai_text_reply
from .lab import write_notebook

pytestmark = pytest.mark.browser


def test_a_background_evaluation_fills_its_cell_while_the_next_cells_run(lab, model_server):
    gate = threading.Event()

    def reply(body):  # row 0 answers at once; the others hold their streams until the gate opens
        n = int(last_user_text(body).split()[2])
        return openai_text_reply(f"It is {n * 2}.", **({} if n == 0 else {"hold_after": 1, "release": gate}))

    write_notebook(lab.root / "background.ipynb", "%load_ext ipyagent",
                   "rows = [{'n': n, 'want': f'It is {n * 2}.'} for n in range(6)]",
                   "%%compare openai:gpt-6-luna --over rows --assert 'contains:{{ row.want }}' --background -o ev\n"
                   "What is {{ row.n }} + {{ row.n }}?",
                   "print('the next cell ran; done:', ev.done)",
                   "ev.wait()\nprint('rows x columns:', len(ev.to_dataframe()))")
    model_server.responder = reply
    try:
        lab.open("background.ipynb")
        lab.command("notebook:run-all-cells")
        lab.cell(3).get_by_text("the next cell ran; done: False").wait_for(timeout=60000)
        running = lab.cell(2).locator(".ipyagent-eval-progress")
        running.get_by_text("1 / 6 runs", exact=False).wait_for(timeout=60000)
        assert "running in the background: ev.wait() waits for it" in lab.cell(2).inner_text()
        lab.screenshot(lab.cell(2), "evaluation-background-running.png")
        gate.set()
        lab.cell(4).get_by_text("rows x columns: 6").wait_for(timeout=60000)
        matrix = lab.cell(2).locator(".ipyagent-evaluation")
        matrix.locator(".ipyagent-eval-pass").first.wait_for(timeout=30000)  # the matrix replaced the progress
        assert matrix.locator(".ipyagent-eval-pass").count() == 6 and running.count() == 0
        lab.screenshot(lab.cell(2), "evaluation-background-done.png")
    finally:
        gate.set()
        model_server.responder = None
