"""Helpers for tests that drive a real kernel: waiting for replies, reading saved widget state."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any



def widget_values(nb) -> dict[str, dict]:
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return {model_id: model["state"] for model_id, model in state.items()}


def transcript_of(cell) -> dict:
    """The saved transcript (its JSON) of the run shown by `cell`."""
    (doc,) = [o["data"]["application/vnd.ipyagent.transcript+json"] for o in cell.outputs
              if "application/vnd.ipyagent.transcript+json" in o.get("data", {})]
    return doc


def view_html(nb, cell) -> tuple[str, str]:
    """(body HTML, footer text) of the run shown by `cell`, as saved: the answer rendered as
    the view renders it, and the footer figures."""
    from ipyagent.core.transcript import Transcript
    from ipyagent.notebook.render.html import markdown_to_html
    from ipyagent.notebook.render.transcript import footer_figures

    transcript = Transcript.from_json(transcript_of(cell))
    return markdown_to_html(transcript.text), " · ".join(footer_figures(transcript))


def wait_reply(kc, msg_id: str, timeout: float | None = None) -> tuple[dict, list[dict]]:
    """The shell reply to `msg_id` and the iopub messages it caused (until idle). With no
    `timeout` it waits as long as the kernel takes (pytest's per-test timeout is the guard)."""
    deadline = time.monotonic() + timeout if timeout is not None else float("inf")
    iopub: list[dict] = []
    reply = None
    idle = False
    while time.monotonic() < deadline and not (reply and idle):
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.05)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
        try:
            while True:
                msg = kc.get_iopub_msg(timeout=0.05)
                if msg["parent_header"].get("msg_id") == msg_id or msg["msg_type"] == "comm_msg":
                    iopub.append(msg)
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle" \
                        and msg["parent_header"].get("msg_id") == msg_id:
                    idle = True
        except queue.Empty:
            pass
    assert reply is not None, f"no reply within {timeout} s"
    return reply, iopub


def wait_iopub(kc, until: Any, timeout: float) -> list[dict]:
    """The iopub messages read until one satisfies `until(msg)` (that one included); fails
    after `timeout` seconds without one."""
    seen: list[dict] = []
    if drain_iopub(kc, seen.append, lambda: bool(seen) and until(seen[-1]), timeout):
        return seen
    raise AssertionError(f"no such iopub message within {timeout} s ({len(seen)} read)")


def drain_iopub(kc, handle: Any, done: Any, timeout: float) -> bool:
    """Passes each iopub message to `handle(msg)` until `done()` holds; True then, False past
    `timeout` seconds (a guard against a hang: callers assert the result). `done()` is looked at
    before the first read, after each message and after each 50 ms without one (it may read what
    changes without a message: a stub server's requests)."""
    deadline = time.monotonic() + timeout
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            handle(kc.get_iopub_msg(timeout=min(left, 0.05)))
        except queue.Empty:
            continue
    return True


def lab_like_client(nb, **kwargs):
    """An nbclient `NotebookClient` that drops the state of closed widgets, as JupyterLab's widget
    manager does (a plain one keeps every widget it saw: test_widget_state_size.py)."""
    from nbclient import NotebookClient

    class LabLikeClient(NotebookClient):
        def handle_comm_msg(self, outs, msg, cell_index):
            super().handle_comm_msg(outs, msg, cell_index)
            if msg["msg_type"] == "comm_close":
                self.widget_state.pop(msg["content"]["comm_id"], None)
                self.widget_buffers.pop(msg["content"]["comm_id"], None)

    return LabLikeClient(nb, **kwargs)


def widget_state_left(nb) -> list[str]:
    """The model names of the widgets whose state a saved notebook keeps."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return [m["model_name"] for m in state.values()]
