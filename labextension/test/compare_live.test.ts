/**
 * compare_live.ts `markRunStates`: the live figures table's rows say "waiting", "streaming…" or
 * show their figures ("done") instead of staying empty. An unknown price's note is said once
 * under the table, live and saved, not in each pane's footer; a lone run says it under its own.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { figuresTable, renderComparison } from '../src/compare';
import { CompareDoc, CompareLiveView, markRunStates } from '../src/compare_live';
import { renderTranscript } from '../src/transcript';
import type { ComparisonTable } from '../src/wire';

const NOTE = "price unknown: http://127.0.0.1:8000/v1 is not openai's own API; set it with ...";

function run(provider: string, note = NOTE): Record<string, unknown> {
  return { format: 'ipyagent.transcript', version: 1, provider, messages: [], price_unknown: true, price_note: note,
    footer: [provider, '0 in / 0 out tokens'] };
}

/** Where the notes are: the node after each (its class), or 'pane' when inside one. */
function notes(root: Element): string[] {
  return [...root.querySelectorAll('.ipyagent-price-note')].map(n =>
    n.closest('.ipyagent-pane') ? 'pane' : `${n.textContent === NOTE ? 'note' : 'other'} before ${
      (n.parentElement!.nextElementSibling as HTMLElement | null)?.className}`);
}

function nextFrame(): Promise<void> {
  return new Promise(resolve => requestAnimationFrame(() => resolve()));
}

function table(rows: string[][]): ComparisonTable {
  return { columns: ['provider:model', 'first token (s)', 'total (s)'], rows, row_runs: [[0, null], [1, null]] } as ComparisonTable;
}

test('rows of runs not started say waiting, started ones streaming…, ended ones show their figures', () => {
  const doc = new CompareDoc();
  doc.receive({ type: 'compare', panes: [{ title: 'a', resolved: 'x:a' }, { title: 'b', resolved: 'x:b' }], runs: 1,
    started: [], table: table([['x:a', '', ''], ['x:b', '', '']]), footer: '', selected: [] } as never);
  const root = document.createElement('div');
  const draw = () => {
    root.replaceChildren(figuresTable(doc.table)!);
    markRunStates(root, doc);
    return [...root.querySelectorAll('tbody tr')].map(tr => [(tr as HTMLElement).dataset.state, tr.children[1].textContent]);
  };
  assert.deepEqual(draw(), [['waiting', 'waiting'], ['waiting', 'waiting']]);
  doc.receive({ type: 'run', pane: 0, run: 0 } as never);
  assert.deepEqual(draw(), [['streaming', 'streaming\u2026'], ['waiting', 'waiting']]);
  doc.receive({ type: 'table', table: table([['x:a', '0.10', '0.50'], ['x:b', '', '']]) } as never);
  assert.deepEqual(draw(), [['done', '0.10'], ['waiting', 'waiting']]);
});

test('a saved comparison says an unknown price once, under its table, not in each pane', () => {
  const root = document.createElement('div');
  root.append(...renderComparison({ format: 'ipyagent.comparison', providers: ['x:a', 'x:b'], runs: 1,
    entries: [{ index: 0, run: 0, transcript: run('x:a') }, { index: 1, run: 0, transcript: run('x:b') }],
    table: table([['x:a', '0.1', '0.5'], ['x:b', '0.2', '0.6']]), footer: ['compared in 0.60 s'] }));
  assert.deepEqual(notes(root), ['note before ipyagent-footer ipyagent-compare-footer']);
  assert.ok(root.querySelector('.ipyagent-compare-figures + .ipyagent-price-notes'));  // right under the table
  const known = { ...run('x:b', 'other note'), cost: { total_usd: 0.001 } };  // a known price: no note
  root.replaceChildren(...renderComparison({ format: 'ipyagent.comparison', providers: ['x:a', 'x:b'], runs: 1,
    entries: [{ index: 0, run: 0, transcript: run('x:a') }, { index: 1, run: 0, transcript: known }],
    table: table([['x:a', '0.1', '0.5'], ['x:b', '0.2', '0.6']]), footer: [] }));
  assert.deepEqual(notes(root), ['note before ipyagent-footer ipyagent-compare-footer']);
});

test('a live comparison says it once under its table as its runs end, not in each pane', async () => {
  const doc = new CompareDoc();
  doc.receive({ type: 'compare', panes: [{ title: 'a', resolved: 'x:a' }, { title: 'b', resolved: 'x:b' }], runs: 1,
    started: [[0, 0], [1, 0]], table: table([['x:a', '', ''], ['x:b', '', '']]), footer: '', selected: [] } as never);
  const root = document.createElement('div');
  const view = new CompareLiveView(root, doc);
  try {
    await nextFrame();
    assert.deepEqual(notes(root), []);
    doc.receive({ type: 'end', key: '0/0', doc: run('x:a') } as never);
    await nextFrame();
    await nextFrame();
    assert.deepEqual(notes(root), ['note before ipyagent-footer ipyagent-compare-footer']);  // no table message yet
    const drawn = root.querySelector('.ipyagent-price-note');
    doc.receive({ type: 'end', key: '1/0', doc: run('x:b') } as never);
    doc.receive({ type: 'table', table: table([['x:a', '0.1', '0.5'], ['x:b', '0.2', '0.6']]) } as never);
    await nextFrame();
    await nextFrame();
    assert.deepEqual(notes(root), ['note before ipyagent-footer ipyagent-compare-footer']);
    assert.equal(root.querySelector('.ipyagent-price-note'), drawn);  // the same notes: not drawn again
  } finally {
    view.dispose();
  }
});

test('a lone run says its unknown price once, under its footer (the README: under the output)', () => {
  const root = document.createElement('div');
  root.append(...renderTranscript(run('x:a')));
  assert.equal(root.querySelectorAll('.ipyagent-price-note').length, 1);
  assert.equal(root.lastElementChild!.previousElementSibling!.className, 'ipyagent-footer');
  assert.equal(root.lastElementChild!.textContent, NOTE);
});
