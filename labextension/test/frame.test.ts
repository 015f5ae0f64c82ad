/**
 * frame.ts: many changes between two frames are one draw (one DOM write), and a disposed view
 * never draws again. The frame clock is the test's: `frame()` runs the callbacks asked for.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FrameClock, FrameScheduler } from '../src/frame';

class Clock implements FrameClock {
  queue = new Map<number, () => void>();
  next = 1;
  requested = 0;
  cancelled = 0;
  request(callback: () => void): number {
    this.requested++;
    const handle = this.next++;
    this.queue.set(handle, callback);
    return handle;
  }
  cancel(handle: number): void {
    if (this.queue.delete(handle)) {
      this.cancelled++;
    }
  }
  frame(): void {
    const due = [...this.queue.values()];
    this.queue.clear();
    due.forEach(callback => callback());
  }
}

/** A scheduler whose draw writes a node's text from a document that `change` grows. */
function setUp() {
  const clock = new Clock();
  const listeners = new Set<() => void>();
  const node = { writes: 0, text: '' };
  const doc = { text: '' };
  const scheduler = new FrameScheduler(
    () => {
      node.writes++;
      node.text = doc.text;
    },
    listeners,
    clock
  );
  const change = (s: string) => {
    doc.text += s;
    listeners.forEach(listener => listener());
  };
  return { clock, listeners, node, scheduler, change };
}

test('many changes between two frames are one write of the latest text, from one request', () => {
  const t = setUp();
  t.clock.frame(); // the first frame, asked for at construction
  for (let i = 0; i < 500; i++) {
    t.change('x');
  }
  const requested = t.clock.requested;
  t.clock.frame();
  t.clock.frame(); // nothing changed since: no write
  assert.deepEqual(
    { writes: t.node.writes, text: t.node.text.length, requested },
    { writes: 2, text: 500, requested: 2 }
  );
});

test('changes after a frame ask for the next one', () => {
  const t = setUp();
  t.clock.frame();
  t.change('a');
  t.clock.frame();
  t.change('b');
  t.change('c');
  t.clock.frame();
  assert.deepEqual(t.node, { writes: 3, text: 'abc' });
});

test('dispose with a frame pending: cancelled, unsubscribed, and later changes draw nothing', () => {
  const t = setUp();
  t.clock.frame();
  t.change('a');
  t.scheduler.dispose();
  t.change('b');
  t.scheduler.schedule();
  t.clock.frame();
  t.clock.frame();
  const { writes } = t.node;
  const seen = { writes, listeners: t.listeners.size, cancelled: t.clock.cancelled, queued: t.clock.queue.size };
  assert.deepEqual(seen, { writes: 1, listeners: 0, cancelled: 1, queued: 0 });
});

test('a frame already running its queue when the view is disposed does not draw', () => {
  const t = setUp();
  t.clock.frame();
  t.change('a');
  const [callback] = [...t.clock.queue.values()];
  t.scheduler.dispose();
  callback();
  assert.equal(t.node.writes, 1);
});
