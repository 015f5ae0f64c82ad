"""Render path: a fast stream through the live widget view, with a fake comm.

Synthetic text deltas (Markdown with headings, lists and code, like a real reply)
arrive at 2,000 per second on an asyncio loop and go through `WidgetView.feed`,
as they do from a driver. The widgets' comm is replaced by one that counts the
messages the front end would receive. Reported for the view and, on the same
deltas, for a naive view that renders and sends a frame per delta:

* frames (body updates sent) and frames per second (target: at most 33/s);
* comm messages sent to the front end in all;
* CPU seconds per 1,000 deltas (process time, rendering and sending included);
* whether the final text and HTML are exact.

Usage: python benchmarks/render_path.py [--quick] [--runs N]
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from common import median, options, print_table, versions, write_json

RATE = 2_000  # deltas per second
TARGET_FPS = 33


class CountingComm:
    """Stands in for a kernel comm: counts what would go to the front end."""

    sent: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.comm_id = f"bench-{id(self)}"
        self.kernel = self  # ipywidgets sends only through a comm that has a kernel

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        CountingComm.sent.append(data or {})

    def open(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_msg(self, callback: Any) -> None:
        pass

    def on_close(self, callback: Any) -> None:
        pass


def install_comm() -> None:
    import comm

    comm.create_comm = CountingComm  # ipywidgets asks `comm.create_comm` for each widget's comm


def deltas(n: int) -> list[str]:
    out = []
    for i in range(n):
        if i % 200 == 0:
            out.append(f"\n\n## Part {i // 200}\n\n")
        elif i % 50 == 0:
            out.append(f"\n- item **{i}** ")
        elif i % 97 == 0:
            out.append(" `x<y>` ")
        else:
            out.append(f"w{i} ")
    return out


class NaiveView:
    """A frame per delta: the whole Markdown rendered, sanitized and sent every time."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        from ipyagent.notebook.view import RunState

        self.state = RunState("bench:m")
        self.body = widgets.HTML(value="")
        self.frames = 0

    def feed(self, event: Any) -> None:
        from ipyagent.notebook.render import markdown_to_html

        if self.state.add(event):
            self.frames += 1
            self.body.value = markdown_to_html(self.state.text)


async def stream(view: Any, pieces: list[str]) -> float:
    """Feed `pieces` at `RATE` per second, then the completion; returns the seconds the stream took."""
    from ipyagent.core import Message, ModelCompleted, ModelStarted, StopReason, TextBlock, TextDelta, Usage

    view.feed(ModelStarted(provider="bench", model="m"))
    start = time.monotonic()
    for i, piece in enumerate(pieces):
        ahead = start + i / RATE - time.monotonic()
        if ahead > 0.001:
            await asyncio.sleep(ahead)
        view.feed(TextDelta(0, piece))
    text = "".join(pieces)
    view.feed(ModelCompleted(message=Message(role="assistant", content=[TextBlock(text=text)]), usage=Usage(input_tokens=1, output_tokens=len(pieces)),
                             stop_reason=StopReason(kind="end_turn"), metadata={"ttft_s": 0.0, "latency_s": time.monotonic() - start}))
    return time.monotonic() - start


def one(kind: str, pieces: list[str]) -> dict[str, Any]:
    from ipyagent.notebook.render import markdown_to_html
    from ipyagent.notebook.view import WidgetView

    view = WidgetView("bench:m") if kind == "view" else NaiveView()
    CountingComm.sent.clear()
    cpu0 = time.process_time()
    seconds = asyncio.run(stream(view, pieces))
    cpu = time.process_time() - cpu0
    body_updates = sum(1 for m in CountingComm.sent if "value" in (m.get("state") or {}) and "ipyagent-footer" not in m["state"]["value"])
    text = "".join(pieces)
    return {"deltas": len(pieces), "stream_s": seconds, "frames": view.frames, "body_updates": body_updates,
            "frames_per_s": view.frames / seconds, "comm_messages": len(CountingComm.sent),
            "cpu_s_per_1000": cpu / len(pieces) * 1000, "delivered_per_s": len(pieces) / seconds,
            "exact": view.state.text == text and view.body.value == markdown_to_html(text)}


def main() -> int:
    args = options(__doc__.splitlines()[0], runs=3)
    install_comm()
    n = 200 if args.quick else 6_000  # three seconds at 2,000 per second
    pieces = deltas(n)
    runs: dict[str, list[dict[str, Any]]] = {"view": [], "naive": []}
    naive_n = min(n, 200 if args.quick else 2_000)  # a frame per delta is slow: a shorter stream
    for _ in range(args.runs):
        runs["view"].append(one("view", pieces))
        runs["naive"].append(one("naive", pieces[:naive_n]))
    summary = {k: {f: median([r[f] for r in v]) for f in v[0] if f != "exact"} | {"exact": all(r["exact"] for r in v)}
               for k, v in runs.items()}
    for figures in summary.values():
        for name in ("deltas", "frames", "body_updates", "comm_messages"):
            figures[name] = round(figures[name])
    ours, naive = summary["view"], summary["naive"]
    rows = [
        ["WidgetView (coalesced)", ours["deltas"], ours["frames"], ours["frames_per_s"], ours["comm_messages"],
         ours["cpu_s_per_1000"], ours["delivered_per_s"], "yes" if ours["exact"] else "NO"],
        ["a frame per delta (naive)", naive["deltas"], naive["frames"], naive["frames_per_s"], naive["comm_messages"],
         naive["cpu_s_per_1000"], naive["delivered_per_s"], "yes" if naive["exact"] else "NO"],
    ]
    print_table(f"Render path: {RATE} deltas/s offered, median of {args.runs} runs",
                ["view", "deltas", "frames", "frames/s", "comm msgs", "CPU s/1000 deltas", "deltas/s kept up", "exact"], rows)
    verdict = {"frames_per_s": ours["frames_per_s"], "target_frames_per_s": TARGET_FPS,
               "meets_target": ours["frames_per_s"] <= TARGET_FPS and ours["exact"],
               "cpu_ratio_naive_over_view": naive["cpu_s_per_1000"] / ours["cpu_s_per_1000"]}
    print(f"\nframes/s {ours['frames_per_s']:.1f} (target <= {TARGET_FPS}); final text exact: {ours['exact']}; "
          f"CPU per 1,000 deltas {ours['cpu_s_per_1000']:.3f} s vs {naive['cpu_s_per_1000']:.3f} s naive "
          f"({verdict['cpu_ratio_naive_over_view']:.1f}x)")
    write_json(args, "render_path", {"rate": RATE, "runs_detail": runs, "summary": summary, "verdict": verdict,
                                      "versions": versions("ipyagent", "ipywidgets", "markdown-it-py", "nh3")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
