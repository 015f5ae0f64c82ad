/**
 * live_run.ts `LiveDoc`: the run as the kernel's messages describe it (wire.ts: a snapshot,
 * then ops in order; notebook/views/run_view.py `WidgetView` sends them).
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LiveDoc } from '../src/live_run';
import type { LiveOp, ServerToolState } from '../src/wire';

function snapshot(doc: LiveDoc, seq: number, ops: LiveOp[]): void {
  doc.receive({ type: 'snapshot', seq, doc: { ops } });
}

test('ops build segments in order; text grows, a call is updated, an approval is asked and answered', () => {
  const doc = new LiveDoc();
  let changes = 0;
  doc.listeners.add(() => changes++);
  snapshot(doc, 0, [
    ['notice', 'history trimmed'],
    ['seg', 1, 'text', null]
  ]);
  doc.receive({
    type: 'ops',
    seq: 1,
    ops: [
      ['text', 1, 'Hel'],
      ['text', 1, 'lo'],
      ['seg', 2, 'tool', { id: 'c1', name: 'f' }],
      ['text', 2, '{"x"'],
      ['ask', 2, { request: 'r1', name: 'f', arguments: { x: 1 } }],
      ['status', { figures: ['openai:m'], ticking: 'approval', elapsed: 1.5 }]
    ]
  });
  assert.deepEqual(doc.order, [1, 2]);
  assert.equal(doc.answer, 'Hello');
  assert.deepEqual(doc.notices, ['history trimmed']);
  const tool = doc.segments.get(2)!;
  assert.deepEqual(
    [tool.kind, tool.text, tool.call, tool.ask?.request],
    ['tool', '{"x"', { id: 'c1', name: 'f' }, 'r1']
  );
  assert.deepEqual([doc.status.figures, doc.status.ticking, doc.status.elapsed], [['openai:m'], 'approval', 1.5]);
  doc.receive({
    type: 'ops',
    seq: 2,
    ops: [['ask', 2, null], ['tool', 2, { approval: 'approved', status: 'ok' }], ['error', 'boom'], ['interrupted']]
  });
  assert.deepEqual([tool.ask, tool.call], [null, { id: 'c1', name: 'f', approval: 'approved', status: 'ok' }]);
  assert.deepEqual([doc.error, doc.interrupted, changes], ['boom', true, 3]);
});

test('ops before the snapshot, or already in it, change nothing; a new snapshot starts over', () => {
  const doc = new LiveDoc();
  doc.receive({ type: 'ops', seq: 1, ops: [['seg', 1, 'text', null]] });
  assert.equal(doc.order.length, 0);
  snapshot(doc, 5, [
    ['seg', 1, 'text', null],
    ['text', 1, 'abc']
  ]);
  doc.receive({ type: 'ops', seq: 5, ops: [['text', 1, 'abc']] });
  doc.receive({
    type: 'ops',
    seq: 6,
    ops: [
      ['text', 1, 'd'],
      ['text', 9, 'no such segment']
    ]
  });
  assert.equal(doc.answer, 'abcd');
  snapshot(doc, 7, [
    ['seg', 3, 'reasoning', null],
    ['text', 3, 'hm']
  ]);
  assert.deepEqual([doc.order, doc.answer, doc.resets], [[3], '', 2]);
});

test("a provider-side tool's card is replaced as it runs; a text segment's citations add up", () => {
  const doc = new LiveDoc();
  snapshot(doc, 0, [
    ['seg', 1, 'server', { id: 's1', name: 'web_search' }],
    ['server', 1, { type: 'server_tool', id: 's1', tool: 'web_search', status: 'pending', progress: 'searching' }],
    ['text', 1, '{"query": "ipy'],
    ['seg', 2, 'text', null],
    ['cite', 2, { url: 'https://a.example/', start: 0, end: 3 }],
    ['cite', 9, { url: 'https://no-such-segment.example/' }]
  ]);
  const sources = [{ url: 'https://a.example/' }];
  const done: ServerToolState = { type: 'server_tool', id: 's1', tool: 'web_search', status: 'ok', sources };
  const server = doc.segments.get(1)!;
  const text = doc.segments.get(2)!;
  const revs = [server.rev, text.rev];
  doc.receive({
    type: 'ops',
    seq: 1,
    ops: [
      ['server', 1, done],
      ['cite', 2, { url: 'https://b.example/', start: 3, end: 5 }]
    ]
  });
  assert.deepEqual([server.card.status, server.card.progress, server.card.sources], ['ok', undefined, sources]);
  assert.equal(server.text, '{"query": "ipy');
  assert.deepEqual(text.citations.map(c => c.url), ['https://a.example/', 'https://b.example/']);
  assert.deepEqual([server.rev, text.rev], [revs[0] + 1, revs[1] + 1]);
});

test('the end brings the transcript and the rest of the saved output', () => {
  const doc = new LiveDoc();
  const output = {
    mime: 'application/vnd.ipyagent.transcript+json',
    fallbacks: { 'text/plain': 'x' },
    metadata: {},
    model_id: 'm1'
  };
  doc.receive({ type: 'end', doc: { provider: 'openai:m', footer: ['openai:m'] }, output });
  assert.deepEqual([doc.final?.provider, doc.output?.model_id], ['openai:m', 'm1']);
});
