"""``%%compare --over ... --background`` in IPython: the cell ends at once with ``-o VAR`` bound to the
running evaluation, the next cell runs while it goes on, ``%reload_ext`` stops it with the finished
runs kept in the run store; and a foreground run's progress line on a terminal. Replies are held by
events, never timed."""

from __future__ import annotations

import os
import re
import threading

from ipyagent.memory.store import RunStore
from ipyagent.notebook.views.evaluation_view import EvaluationView

from ..support.evaluation import CAPITALS, capital_of, last_user_text
from ..support.stub_server import StubServer, openai_text_reply
from ..support.views import Tty


def _held(gate: threading.Event, quick: tuple[str, ...] = ()):
    """Answers the capital; a row not in `quick` stops after its first piece until `gate` is set."""
    def reply(body):
        text = last_user_text(body)
        held = {} if any(c in text for c in quick) else {"hold_after": 1, "release": gate}
        return openai_text_reply(capital_of(text), **held)
    return reply


def test_background_binds_the_running_evaluation_and_the_next_cell_runs_meanwhile(ip, capsys) -> None:
    gate = threading.Event()
    with StubServer(responder=_held(gate)) as a:
        ip.run_line_magic("provider", f"--alias good openai:m --base-url {a.url}")
        ip.user_ns["rows"] = CAPITALS
        returned = ip.run_cell_magic("compare", "good --over rows --repeat 2 --background "
                                     "--assert 'contains:{{ row.capital }}' -o ev", "Capital of {{ row.country }}?")
        ev = ip.user_ns["ev"]
        assert returned is None and not ev.done and ev.progress.total == 6
        assert ip.run_cell("after = 6 * 7").success and ip.user_ns["after"] == 42  # the next cell ran to its end
        assert not ev.done and ev.progress.finished == 0
        gate.set()
        assert ev.wait() is True
    assert len(ev.to_dataframe()) == 6 and all(r.passed for r in ev.results)
    err = capsys.readouterr().err
    assert "ipyagent: evaluating 6 runs in the background; ev.progress, ev.wait(), ev.cancel()" in err
    ended = r"ipyagent: the background evaluation ev ended: 6 / 6 runs · .* · cost unknown; ev.summary\(\)"
    assert re.search(ended, err)  # a --base-url model: no price known


def test_reload_ext_stops_a_background_evaluation_and_keeps_what_finished(ip, monkeypatch) -> None:
    gate, first = threading.Event(), threading.Event()
    monkeypatch.setattr(EvaluationView, "update", lambda view, result=None: first.set())
    with StubServer(responder=_held(gate, quick=("France",))) as a:
        ip.run_line_magic("provider", f"openai:m --base-url {a.url}")
        ip.user_ns["rows"] = CAPITALS
        ip.run_cell_magic("compare", "openai:m --over rows --background -o ev", "Capital of {{ row.country }}?")
        ev = ip.user_ns["ev"]
        assert first.wait(30)  # the quick row ended; the others are held
        ip.run_line_magic("reload_ext", "ipyagent")
        assert ev.done and ev.interrupted
        gate.set()
    assert [r.fields["country"] for r in ev.results] == ["France"]
    store = RunStore(os.environ["IPYAGENT_RUN_STORE"])
    try:
        assert [run["prompt"] for run in store.runs(session=ev.id)] == ["Capital of France?"]
    finally:
        store.close()


def test_a_terminal_shows_a_progress_line_while_it_runs_and_rubs_it_out(ip) -> None:
    import sys

    with StubServer(responder=_held(threading.Event(), quick=("France", "Japan", "Peru"))) as a:
        ip.run_line_magic("provider", f"--alias small openai:gpt-4.1-nano --base-url {a.url}/v1 "
                                      "--price-as openai:gpt-4.1-nano")
        ip.user_ns["rows"] = CAPITALS
        saved, sys.stdout = sys.stdout, Tty()
        try:
            ip.run_cell_magic("compare", "small --over rows --concurrency 1 --no-cache",
                              "Capital of {{ row.country }}?")
            raw = sys.stdout.getvalue()
        finally:
            sys.stdout = saved
    # the first run's end draws it at once: the count, the rate, the time left, the money spent
    assert re.search(r"\revaluating · 1 / 3 runs · [0-9.e+-]+ runs/s · \d+ s left · \$0\.0+[1-9]\d* spent", raw)
    drawn, matrix = raw.rsplit("\r", 1)
    assert drawn.endswith("\r" + " " * len(drawn.split("\r")[-2])) and "evaluating" not in matrix  # rubbed out
    assert matrix.startswith("\x1b[1m1 provider × 3 rows: 3 of 3 runs")


def test_a_background_views_widget_says_so_and_shows_the_matrix_when_it_ends(monkeypatch) -> None:
    """JupyterLab applies a display update only while the cell that displayed it runs: a background
    evaluation's widget gets the matrix itself; a foreground one's output is replaced as before.
    Without the live matrix's front end (evaluation_pages.py; test_evaluation_pages.py has it), the
    widget is the progress table's HTML."""
    from ipyagent import Evaluation
    from ipyagent.notebook import saved_outputs
    from ipyagent.notebook.saved_outputs import SavedOutputs
    from ipyagent.notebook.views import evaluation_view, live_widget, transcript_output

    monkeypatch.setattr(live_widget, "available", lambda: False)

    updates: list[dict] = []
    monkeypatch.setattr(saved_outputs, "SAVED", SavedOutputs())
    for module in (evaluation_view, transcript_output):
        monkeypatch.setattr(module, "display", lambda obj, **kw: None, raising=False)
        monkeypatch.setattr(module, "update_display", lambda data, **kw: updates.append(data), raising=False)
    ev = Evaluation(["openai:m"], ["a row", "another"], variants=["terse", "long"])
    background, foreground = (EvaluationView(ev, widgets=True, background=True, out="run"),
                              EvaluationView(ev, widgets=True))
    assert "0 / 4 runs" in background.widget.value and "0 / 4 runs" in foreground.widget.value  # the progress line
    assert "running in the background: run.wait() waits for it, run.cancel() stops it" in background.widget.value
    progress = foreground.widget.value
    background.finish()
    foreground.finish()
    assert background.widget.value == updates[0]["text/html"] and "ipyagent-eval-title" in updates[0]["text/html"]
    assert foreground.widget.value == progress  # replaced by the display update
