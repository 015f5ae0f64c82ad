"""The live views' frame scheduler (labextension/src/frame.ts), run in Node with a frame clock the
test advances by hand: many changes between two frames are one draw (one DOM write), and a
disposed view never draws again.

The TypeScript is bundled on the fly by the labextension's own esbuild, so the test reads the
source as it is, not a stale build.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[2] / "labextension"
ESBUILD = LABEXT / "node_modules" / ".bin" / "esbuild"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(not (NODE and ESBUILD.exists()), reason="needs node and the labextension's npm install (make install)")

# A frame clock: request() queues a callback, frame() runs the queued ones (one animation frame).
# Each scenario drives one scheduler whose draw() writes a node's text, and reports what happened.
SCENARIOS = """
class Clock {
  constructor() { this.queue = new Map(); this.next = 1; this.requested = 0; this.cancelled = 0; }
  request(cb) { this.requested++; const h = this.next++; this.queue.set(h, cb); return h; }
  cancel(h) { if (this.queue.delete(h)) this.cancelled++; }
  frame() { const due = [...this.queue.values()]; this.queue.clear(); due.forEach(cb => cb()); }
}
function setup() {
  const clock = new Clock();
  const listeners = new Set();
  const node = { writes: 0, text: '' };
  const doc = { text: '' };
  const scheduler = new FrameScheduler(() => { node.writes++; node.text = doc.text; }, listeners, clock);
  const change = s => { doc.text += s; listeners.forEach(l => l()); };
  return { clock, listeners, node, scheduler, change };
}
const out = {};
{ // many changes between two frames: one write, of the latest text
  const t = setup();
  t.clock.frame();                       // the first frame (asked for at construction)
  for (let i = 0; i < 500; i++) t.change('x');
  const requestedBefore = t.clock.requested;
  t.clock.frame();
  t.clock.frame();                       // nothing changed since: no write
  out.coalesce = { writes: t.node.writes, text: t.node.text.length, requested: requestedBefore };
}
{ // changes after a frame ask for the next one
  const t = setup();
  t.clock.frame();
  t.change('a'); t.clock.frame();
  t.change('b'); t.change('c'); t.clock.frame();
  out.next = { writes: t.node.writes, text: t.node.text };
}
{ // dispose with a frame pending: cancelled, unsubscribed, and later changes draw nothing
  const t = setup();
  t.clock.frame();
  t.change('a');
  t.scheduler.dispose();
  t.change('b');
  t.scheduler.schedule();
  t.clock.frame(); t.clock.frame();
  out.dispose = { writes: t.node.writes, listeners: t.listeners.size, cancelled: t.clock.cancelled, queued: t.clock.queue.size };
}
{ // a frame already running its queue when the view is disposed does not draw
  const t = setup();
  t.clock.frame();
  t.change('a');
  const [cb] = [...t.clock.queue.values()];
  t.scheduler.dispose();
  cb();
  out.late = { writes: t.node.writes };
}
console.log(JSON.stringify(out));
"""


def test_frame_scheduler_coalesces_changes_into_one_draw_and_never_draws_after_dispose(tmp_path: Path) -> None:
    bundled = subprocess.run([str(ESBUILD), str(LABEXT / "src" / "frame.ts"), "--format=esm"],
                             capture_output=True, text=True, check=True).stdout
    script = tmp_path / "frame_test.mjs"
    script.write_text(bundled + SCENARIOS)
    result = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    # The first frame draws once; 500 changes before the next are one more write, of all 500 characters,
    # from one frame request; a frame with nothing new writes nothing.
    assert out["coalesce"] == {"writes": 2, "text": 500, "requested": 2}
    assert out["next"] == {"writes": 3, "text": "abc"}
    assert out["dispose"] == {"writes": 1, "listeners": 0, "cancelled": 1, "queued": 0}
    assert out["late"] == {"writes": 1}
