"""Helpers for tests that drive a real kernel: waiting for replies, reading saved widget state."""

from __future__ import annotations

import queue
import time
from typing import Any


def widget_values(nb) -> dict[str, dict]:
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return {model_id: model["state"] for model_id, model in state.items()}


def view_html(nb, cell) -> tuple[str, str]:
    """(body HTML, footer HTML) of the agent view displayed by `cell`."""
    states = widget_values(nb)
    # When the run ended, the live view's output was replaced by the transcript, which names the view's model.
    (view_id,) = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] if "data" in o
                  and "application/vnd.jupyter.widget-view+json" in o["data"] else o["metadata"]["ipyagent"]["view_model_id"]
                  for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
                  or "view_model_id" in o.get("metadata", {}).get("ipyagent", {})]
    children = [c.removeprefix("IPY_MODEL_") for c in states[view_id]["children"]]
    return states[children[1]]["value"], states[children[-1]]["value"]


def wait_reply(kc, msg_id: str, timeout: float) -> tuple[dict, list[dict]]:
    """The shell reply to `msg_id` and the iopub messages it caused (until idle)."""
    deadline = time.monotonic() + timeout
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
