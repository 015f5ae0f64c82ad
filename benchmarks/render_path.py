"""Render path: long, fast answers through the live view's kernel side, with a counting comm.

Markdown answers (headings, lists, code, tables) of 2k, 20k, 60k and 135k
characters arrive as text deltas of 3 characters at 3,000 deltas per second on
an asyncio loop, and go through `WidgetView.feed` as they do from a driver. A
front end has said hello, so frames are really sent; the widgets' comm is
replaced by one that counts what the front end would receive. Reported per
answer length:

* kernel CPU seconds per 1,000 deltas (process time; feeding, coalescing and
  sending included) — target: at 135k at most 1.5x the figure at 2k;
* bytes sent to the front end per frame, and frames in the busiest second
  (target: at most 33);
* whether the text the front end rebuilds from the messages is exact, and the saved output's
  HTML fallback (rendered while the answer streams, `StreamedMarkdown`, its CPU included
  above; the column gives its last step, at the end) equals the whole answer rendered at once.

The baseline, measured in the same run on the 2k and 20k answers (longer ones
fall minutes behind), is the previous renderer: every frame renders the whole
answer (markdown-it-py + nh3) and sends the whole HTML.

Usage: python benchmarks/render_path.py [--quick] [--runs N]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from common import median, options, print_table, versions, write_json

RATE = 3_000  # deltas per second
CHARS_PER_DELTA = 3
SIZES = (2_000, 20_000, 60_000, 135_000)
QUICK_SIZES = (2_000, 20_000)
BASELINE_SIZES = (2_000, 20_000)
TARGET_FPS = 33
TARGET_CPU_RATIO = 1.5


class CountingComm:
    """Stands in for a kernel comm: keeps what would go to the front end."""

    sent: list[tuple[float, int, dict[str, Any]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.comm_id = f"bench-{id(self)}"
        self.kernel = self  # ipywidgets sends only through a comm that has a kernel

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        data = data or {}
        CountingComm.sent.append((time.monotonic(), len(json.dumps(data, ensure_ascii=False)), data))

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


def answer(chars: int) -> str:
    """A Markdown answer of `chars` characters with the structure of a long reply."""
    blocks, n = [], 0
    while sum(map(len, blocks)) < chars:
        n += 1
        blocks.append(
            f"## Section {n}\n\nSome prose about part {n}, with **bold**, `code` and a "
            f"[link](https://example.com/{n}).\n"
        )
        blocks.append("\n".join(f"- item {n}.{i}: a point worth making" for i in range(4)) + "\n")
        blocks.append(f"```python\ndef f{n}(x):\n    return x * {n}\n```\n")
        blocks.append("| a | b |\n|---|---|\n" + "\n".join(f"| {n}.{i} | {i * n} |" for i in range(3)) + "\n")
    return "\n".join(blocks)[:chars]


def pieces_of(text: str) -> list[str]:
    return [text[i:i + CHARS_PER_DELTA] for i in range(0, len(text), CHARS_PER_DELTA)]


class BaselineView:
    """The previous renderer: coalesced frames, each rendering and sending the whole answer's HTML."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        from ipyagent.notebook.views.run_view import FRAME_INTERVAL, RunState

        self.interval = FRAME_INTERVAL
        self.state = RunState("bench:m")
        self.body = widgets.HTML(value="")
        self.frames = 0
        self._last = 0.0
        self._pending: asyncio.TimerHandle | None = None

    def feed(self, event: Any) -> None:
        if not self.state.add(event):
            return
        if self.state.finished:
            self._frame()
        elif self._pending is None:
            wait = self._last + self.interval - time.monotonic()
            if wait <= 0:
                self._frame()
            else:
                self._pending = asyncio.get_running_loop().call_later(wait, self._frame)

    def _frame(self) -> None:
        from ipyagent.notebook.render.html import markdown_to_html

        if self._pending is not None:
            self._pending.cancel()
        self._pending = None
        self._last = time.monotonic()
        self.frames += 1
        self.body.value = markdown_to_html(self.state.text)


async def stream(view: Any, pieces: list[str]) -> float:
    """Feed `pieces` at `RATE` per second, then the completion; returns the seconds the stream took."""
    from ipyagent.core import Message, ModelCompleted, ModelStarted, StopReason, TextBlock, TextDelta, Usage

    if hasattr(view, "_hello"):
        view._hello()  # a front end is showing the view
    view.feed(ModelStarted(provider="bench", model="m"))
    start = time.monotonic()
    for i, piece in enumerate(pieces):
        ahead = start + i / RATE - time.monotonic()
        if ahead > 0.001:
            await asyncio.sleep(ahead)
        view.feed(TextDelta(0, piece))
    text = "".join(pieces)
    view.feed(
        ModelCompleted(
            message=Message(role="assistant", content=[TextBlock(text=text)]),
            usage=Usage(input_tokens=1, output_tokens=len(pieces)),
            stop_reason=StopReason(kind="end_turn"),
            metadata={"ttft_s": 0.0, "latency_s": time.monotonic() - start},
        )
    )
    return time.monotonic() - start


def rebuilt_text(messages: list[dict[str, Any]]) -> str:
    """The answer as the live front end rebuilds it from the custom messages (live.ts, LiveDoc)."""
    segments: dict[int, list[str]] = {}
    kinds: dict[int, str] = {}
    for data in messages:
        content = data.get("content") if data.get("method") == "custom" else None
        if not content or content.get("type") not in ("snapshot", "ops"):
            continue
        ops = content["doc"]["ops"] if content["type"] == "snapshot" else content["ops"]
        for op in ops:
            if op[0] == "seg":
                kinds[op[1]] = op[2]
                segments.setdefault(op[1], [])
            elif op[0] == "text":
                segments[op[1]].append(op[2])
    return "".join("".join(parts) for sid, parts in segments.items() if kinds[sid] == "text")


def busiest_second(times: list[float]) -> int:
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


class WithSavedHtml:
    """The live view, plus what a notebook run (`LiveTranscript`) adds to the kernel's render path:
    the saved output's HTML fallback rendered while the answer streams (`StreamedMarkdown`)."""

    def __init__(self, view: Any) -> None:
        from ipyagent.notebook.render.streamed_html import StreamedMarkdown

        self.view = view
        self.markdown = StreamedMarkdown()

    def _hello(self) -> None:
        self.view._hello()

    def feed(self, event: Any) -> None:
        self.view.feed(event)
        if event.type == "text_delta":
            self.markdown.append((1, event.index, event.type), event.text)


def one(kind: str, text: str) -> dict[str, Any]:
    from ipyagent.notebook.render.html import markdown_to_html
    from ipyagent.notebook.views.run_view import WidgetView

    pieces = pieces_of(text)
    view = WithSavedHtml(WidgetView("bench:m")) if kind == "view" else BaselineView()
    CountingComm.sent.clear()
    cpu0 = time.process_time()
    seconds = asyncio.run(stream(view, pieces))
    end0 = time.process_time()
    saved_html = view.markdown.html(text) if kind == "view" else None  # the end: only the unfinished rest
    cpu_end = time.process_time() - end0
    cpu = time.process_time() - cpu0
    if kind == "view":
        frames = [(t, size) for t, size, data in CountingComm.sent
                  if data.get("method") == "custom" and data["content"].get("type") == "ops"]
        exact = rebuilt_text([d for _, _, d in CountingComm.sent]) == text and saved_html == markdown_to_html(text)
    else:
        frames = [(t, size) for t, size, data in CountingComm.sent if "value" in (data.get("state") or {})]
        exact = view.body.value == __import__("ipyagent.notebook.render.html", fromlist=["x"]).markdown_to_html(text)
    sizes = [size for _, size in frames]
    return {"chars": len(text), "deltas": len(pieces), "stream_s": seconds, "frames": len(frames),
            "busiest_second_frames": busiest_second([t for t, _ in frames]),
            "bytes_per_frame": sum(sizes) / max(len(sizes), 1), "max_bytes_per_frame": max(sizes, default=0),
            "cpu_s_per_1000": cpu / len(pieces) * 1000, "html_at_end_s": cpu_end, "exact": exact}


def main() -> int:
    args = options(__doc__.splitlines()[0], runs=1)
    install_comm()
    sizes = QUICK_SIZES if args.quick else SIZES
    runs: dict[str, list[dict[str, Any]]] = {}
    from ipyagent.notebook.render.html import markdown_to_html

    markdown_to_html("*warm*")  # markdown-it's first use builds its rules: not the shortest answer's cost
    for _ in range(args.runs):
        for size in sizes:
            text = answer(size)
            runs.setdefault(f"view-{size}", []).append(one("view", text))
            if size in BASELINE_SIZES:
                runs.setdefault(f"baseline-{size}", []).append(one("baseline", text))
    summary = {k: {f: median([r[f] for r in v]) for f in v[0] if f != "exact"} | {"exact": all(r["exact"] for r in v)}
               for k, v in runs.items()}
    rows = []
    for key, s in summary.items():
        rows.append(
            [
                ("live view " if key.startswith("view") else "baseline (whole answer per frame) ")
                + f"{s['chars']:,} chars",
                round(s["deltas"]),
                s["stream_s"],
                s["cpu_s_per_1000"],
                round(s["bytes_per_frame"]),
                round(s["frames"]),
                round(s["busiest_second_frames"]),
                round(s["html_at_end_s"], 3) if key.startswith("view") else "-",
                "yes" if s["exact"] else "NO",
            ]
        )
    print_table(f"Render path: {RATE:,} deltas/s of {CHARS_PER_DELTA} chars, median of {args.runs} run(s)",
                ["view / answer", "deltas", "stream s", "kernel CPU s/1000 deltas", "bytes/frame", "frames",
                 "frames in busiest s", "saved HTML at end s", "exact"], rows)
    small, large = summary[f"view-{sizes[0]}"], summary[f"view-{sizes[-1]}"]
    cpu_ratio = large["cpu_s_per_1000"] / small["cpu_s_per_1000"]
    views = [v for k, v in summary.items() if k.startswith("view")]
    verdict = {
        "cpu_ratio_longest_over_shortest": cpu_ratio,
        "target_cpu_ratio": TARGET_CPU_RATIO,
        "max_frames_per_s": max(v["busiest_second_frames"] for v in views),
        "target_frames_per_s": TARGET_FPS,
        "exact": all(v["exact"] for v in views),
        "baseline_cpu_ratio_20k_over_2k": (
            summary["baseline-20000"]["cpu_s_per_1000"] / summary["baseline-2000"]["cpu_s_per_1000"]
            if "baseline-20000" in summary
            else None
        ),
    }
    verdict["meets_target"] = (verdict["exact"] and verdict["max_frames_per_s"] <= TARGET_FPS
                               and (args.quick or cpu_ratio <= TARGET_CPU_RATIO))
    print(f"\nkernel CPU per 1,000 deltas, {large['chars']:,} vs {small['chars']:,} chars: {cpu_ratio:.2f}x "
          f"(target <= {TARGET_CPU_RATIO}); baseline 20k vs 2k: {verdict['baseline_cpu_ratio_20k_over_2k'] or 0:.2f}x; "
          f"busiest second {verdict['max_frames_per_s']} frames (target <= {TARGET_FPS}); exact: {verdict['exact']}")
    write_json(
        args,
        "render_path",
        {
            "rate": RATE,
            "chars_per_delta": CHARS_PER_DELTA,
            "runs_detail": runs,
            "summary": summary,
            "verdict": verdict,
            "versions": versions("ipyagent", "ipywidgets", "anywidget", "markdown-it-py", "nh3"),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
