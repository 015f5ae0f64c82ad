"""A page that missed a run's end asks the kernel for its saved output (notebook/saved_outputs.py)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from ipyagent.core import ModelStarted, TextDelta
from ipyagent.notebook.saved_outputs import TARGET, SavedOutputs, register, unregister
from ..support.views import completed


class Comm:
    """A page's comm, as the kernel sees it: what was sent to it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)


def _ask(saved: SavedOutputs, *ids: Any) -> Comm:
    comm = Comm()
    saved.open(comm, {"content": {"data": {"model_ids": list(ids)}}})
    return comm


def _output(text: str) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {"text/plain": text},
        "metadata": {"ipyagent": {"record": "transcript"}},
    }


def test_a_finished_run_is_answered_at_once_and_an_unknown_id_left_out() -> None:
    saved = SavedOutputs()
    saved.started("a")
    saved.finished("a", {"text/plain": "A"}, {"ipyagent": {"record": "transcript"}})
    comm = _ask(saved, "a", "other-kernels", 7)
    assert comm.sent == [{"outputs": {"a": _output("A")}, "pending": []}]


def test_a_running_one_is_pending_then_sent_when_it_ends() -> None:
    saved = SavedOutputs()
    saved.started("a")
    saved.started("b")
    comm = _ask(saved, "a", "b")
    assert comm.sent == [{"outputs": {}, "pending": ["a", "b"]}]
    saved.finished("b", {"text/plain": "B"}, {"ipyagent": {"record": "transcript"}})
    saved.finished("a", {"text/plain": "A"}, {"ipyagent": {"record": "transcript"}})
    assert comm.sent[1:] == [{"outputs": {"b": _output("B")}, "pending": ["a"]},
                             {"outputs": {"a": _output("A")}, "pending": []}]
    saved.finished("a", {"text/plain": "again"}, {})  # nobody waits any more
    assert len(comm.sent) == 3


def test_the_oldest_outputs_go_past_the_limit() -> None:
    saved = SavedOutputs(keep=2)
    for name in "abc":
        saved.started(name)
        saved.finished(name, {"text/plain": name}, {})
    assert set(_ask(saved, "a", "b", "c").sent[0]["outputs"]) == {"b", "c"}


@pytest.mark.parametrize("data", [None, [], {"model_ids": "a"}, {"model_ids": None}])
def test_a_malformed_question_gets_an_empty_answer(data: Any) -> None:
    saved = SavedOutputs()
    saved.started("a")
    comm = Comm()
    saved.open(comm, {"content": {"data": data}})
    assert comm.sent == [{"outputs": {}, "pending": []}]


def test_the_live_output_is_marked_and_its_saved_output_kept_by_model_id(monkeypatch) -> None:
    """What a run displays live (marked, so a page knows to ask) and the output a page that
    asked while it ran gets: the display update's own data and metadata."""
    from ipyagent.notebook import saved_outputs
    from ipyagent.notebook.views import transcript_output
    from ipyagent.notebook.views.transcript_output import LiveTranscript
    from ipyagent.notebook.views.run_view import WidgetView

    shown: list[tuple[str, Any]] = []
    monkeypatch.setattr(saved_outputs, "SAVED", SavedOutputs())
    monkeypatch.setattr(transcript_output, "display", lambda obj, **kw: shown.append(("display", (obj, kw))))
    monkeypatch.setattr(transcript_output, "update_display",
                        lambda data, **kw: shown.append(("update", {"data": data, "metadata": kw["metadata"]})))

    view = None

    async def main() -> tuple[str, Comm, Comm]:
        nonlocal view
        view = WidgetView("openai:m")
        model_id = view.widget.model_id
        live = LiveTranscript(view, provider="openai:m", prompt="Hi")
        asked_before = _ask(saved_outputs.SAVED, model_id)
        live.feed(ModelStarted(provider="openai", model="m"))
        live.feed(TextDelta(0, "Hello **there**"))
        live.feed(completed("Hello **there**"))
        live.finish(None)
        return model_id, asked_before, _ask(saved_outputs.SAVED, model_id)

    model_id, before, after = asyncio.run(main())
    (widget, kw), update = shown[0][1], shown[1][1]
    assert widget is view.widget and kw["metadata"] == {"ipyagent": {"live": True}}
    output = {"output_type": "display_data", **update}
    assert before.sent == [{"outputs": {}, "pending": [model_id]}, {"outputs": {model_id: output}, "pending": []}]
    assert after.sent == [{"outputs": {model_id: output}, "pending": []}]
    assert "Hello" in output["data"]["text/html"]


def test_the_comm_target_is_registered_in_a_kernel_only() -> None:
    from comm import get_comm_manager

    class Shell:
        kernel: Any = None

    register(Shell())
    assert TARGET not in get_comm_manager().targets
    shell = Shell()
    shell.kernel = object()
    register(shell)
    try:
        assert TARGET in get_comm_manager().targets
    finally:
        unregister(shell)
    assert TARGET not in get_comm_manager().targets


def test_an_evaluations_progress_widget_is_marked_and_its_saved_output_kept(monkeypatch) -> None:
    """%%compare --over's progress widget (an ipywidgets HTML) takes the same path: a page that
    missed its end gets the matrix, not the last progress drawn."""
    from ipyagent.agent.evaluation.results import Evaluation
    from ipyagent.notebook import saved_outputs
    from ipyagent.notebook.views import evaluation_view, transcript_output
    from ipyagent.notebook.views.evaluation_view import EvaluationView

    shown: list[tuple[str, Any]] = []
    monkeypatch.setattr(saved_outputs, "SAVED", SavedOutputs())
    for module in (evaluation_view, transcript_output):  # where each name is used
        monkeypatch.setattr(module, "display", lambda obj, **kw: shown.append(("display", kw)), raising=False)
        monkeypatch.setattr(module, "update_display", raising=False,
                            value=lambda data, **kw: shown.append(("update", {"data": data,
                                                                            "metadata": kw["metadata"]})))
    view = EvaluationView(Evaluation(["openai:m"], ["a row"]), widgets=True)
    model_id = view.widget.model_id  # the live matrix's widget is closed once the saved output replaced it
    asked = _ask(saved_outputs.SAVED, model_id)
    view.finish()
    assert shown[0] == ("display", {"display_id": view.display_id, "metadata": {"ipyagent": {"live": True}}})
    assert asked.sent[-1] == {"outputs": {model_id: {"output_type": "display_data", **shown[1][1]}}, "pending": []}
    assert "application/vnd.ipyagent.evaluation+json" in shown[1][1]["data"]


def test_an_interrupted_runs_saved_footer_keeps_its_first_token_time(monkeypatch) -> None:
    """JupyterLab's saved footer read 'total 4.07 s · interrupted' where the terminal said 'first token
    1.86 s': an interrupted run has no finished turn to give the driver's figure; the view's is kept."""
    from ipyagent.core.figures import footer_figures
    from ipyagent.notebook.views import transcript_output
    from ipyagent.notebook.views.transcript_output import LiveTranscript
    from ipyagent.notebook.views.text_view import TextView

    monkeypatch.setattr(transcript_output, "update_display", lambda data, **kw: None)
    view = TextView("openai:m", stream=io.StringIO())
    live = LiveTranscript(view, provider="openai:m", prompt="Hi", show=False)
    live.feed(ModelStarted(provider="openai", model="m"))
    live.feed(TextDelta(0, "Hello, the"))
    view.mark_interrupted()
    t = live.finish(None)
    assert t.status == "interrupted" and t.timings.first_token_s == round(view.state.first_token, 4)
    assert f"first token {t.timings.first_token_s:.2f} s" in footer_figures(t)


def test_a_run_named_by_an_alias_keeps_it_in_its_saved_transcript(monkeypatch) -> None:
    """``%%agent -p small``: the saved footer (drawn by the labextension as written) names the
    alias before the id, as the live footer did."""
    from ipyagent.core.figures import footer_figures
    from ipyagent.notebook.views import transcript_output
    from ipyagent.notebook.views.transcript_output import LiveTranscript
    from ipyagent.notebook.views.text_view import TextView

    monkeypatch.setattr(transcript_output, "update_display", lambda data, **kw: None)
    view = TextView("small · openai:m", stream=io.StringIO())
    live = LiveTranscript(view, provider="openai:m", prompt="Hi", show=False, alias="small")
    live.feed(ModelStarted(provider="openai", model="m"))
    t = live.finish(None)
    assert (t.provider, t.alias) == ("openai:m", "small")
    assert footer_figures(t)[0] == "small · openai:m" == t.to_json()["footer"][0]
