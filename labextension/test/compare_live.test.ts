/**
 * compare_live.ts `markRunStates`: the live figures table's rows say "waiting", "streaming…" or
 * show their figures ("done") instead of staying empty.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { figuresTable } from '../src/compare';
import { CompareDoc, markRunStates } from '../src/compare_live';
import type { ComparisonTable } from '../src/wire';

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
