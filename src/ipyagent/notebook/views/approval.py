"""Approve / Deny buttons for tool calls that need approval: an `Agent.approve` callback for notebooks.

Use it from Python in a cell with top-level await (ipykernel processes widget
events while such a cell awaits)::

    agent = Agent("openai:gpt-6-luna", tools=[delete_file], approve=ApprovalButtons())
    result = await agent.arun("Clean up the temp files")

``%%agent`` cells use it too; as they block, the magic lets clicks through
with jupyter-ui-poll.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from IPython.display import display

from ...core import ToolAction, redact, redact_data
from ..render.html import escape

#: The arguments' box: wrapped, at most 16 lines tall, scrolled beyond.
ARGS_STYLE = "white-space:pre-wrap;word-break:break-all;max-height:16em;overflow:auto;margin:2px 0"


class ApprovalButtons:
    """Shows one row per call (what would run, Approve, Deny) and waits for a click.

    Args:
        container: an ipywidgets Box to add the rows to; by default a VBox
            displayed in the current cell when the first approval is asked.
    """

    def __init__(self, container: Any = None) -> None:
        self.container = container

    async def __call__(self, action: ToolAction, preview: str | None = None) -> bool:
        """Ask about `action`; `preview` (a notebook change's diff) is shown under its arguments."""
        import ipywidgets as widgets

        if self.container is None:
            self.container = widgets.VBox([])
            display(self.container)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool] = loop.create_future()
        # Long arguments wrap and scroll in a capped box, so the buttons under them stay in view.
        arguments = escape(json.dumps(redact_data(action.input), ensure_ascii=False, indent=1))
        shown = f'<pre class="ipyagent-preview" style="{ARGS_STYLE}">{escape(redact(preview))}</pre>' if preview else ""
        label = widgets.HTML(f"<b>{escape(action.native_name)}</b> wants to run with"
                             f'<pre style="{ARGS_STYLE}">{arguments}</pre>{shown}')
        approve = widgets.Button(description="Approve", button_style="success", icon="check")
        deny = widgets.Button(description="Deny", button_style="danger", icon="times")
        row = widgets.VBox([label, widgets.HBox([approve, deny])])

        def decide(value: bool) -> None:
            if not answer.done():
                answer.set_result(value)

        # Clicks arrive on the kernel's thread; the answer is handed to this loop. The row is
        # marked shown only once the handlers are attached, so no click can come before them.
        approve.on_click(lambda _: loop.call_soon_threadsafe(decide, True))
        deny.on_click(lambda _: loop.call_soon_threadsafe(decide, False))
        row.add_class("ipyagent-approval")
        self.container.children = (*self.container.children, row)
        try:
            verdict = await answer
        finally:
            approve.disabled = deny.disabled = True
        label.value += "approved by you" if verdict else "denied"
        return verdict
