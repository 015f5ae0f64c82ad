/**
 * compare.ts `figuresTable`: a cost column no run knows is left out (the price note under the
 * output says it once), as render/html.py `cells_to_html` does, and the marks after it stay on
 * their figures.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { figuresTable } from '../src/compare';
import type { ComparisonTable } from '../src/wire';

const columns = ['provider:model', 'total (s)', 'cost', 'tokens', 'error'];

function drawn(table: ComparisonTable): { head: string[]; cells: string[][]; bold: string[] } {
  const node = figuresTable(table)!;
  const text = (e: Element) => e.textContent ?? '';
  return {
    head: [...node.querySelectorAll('th')].map(text),
    cells: [...node.querySelectorAll('tbody tr')].map(tr => [...tr.children].map(text)),
    bold: [...node.querySelectorAll('td.ipyagent-best')].map(text),
  };
}

test('a cost column of unknown prices only is left out, the marks after it kept on their figures', () => {
  const table = { columns, rows: [['x:a', '0.50', '\u2014', '12', ''], ['x:b', '0.90', '', '30', '']],
    row_runs: [[0, null], [1, null]], marks: [{ row: 0, column: 1, label: 'fastest' },
      { row: 0, column: 3, label: 'fewest tokens' }, { row: 1, column: 2, label: 'cheapest' }] } as ComparisonTable;
  const { head, cells, bold } = drawn(table);
  assert.deepEqual(head, ['provider:model', 'total (s)', 'tokens', 'error']);
  assert.deepEqual(cells, [['x:a', '0.50', '12', ''], ['x:b', '0.90', '30', '']]);
  assert.deepEqual(bold, ['0.50', '12']);
});

test('a cost column with one known price stays, with its dashes', () => {
  const table = { columns, rows: [['x:a', '0.50', '$0.0012', '12', ''], ['x:b', '0.90', '\u2014', '30', '']],
    row_runs: [[0, null], [1, null]], marks: [{ row: 0, column: 2, label: 'cheapest' }] } as ComparisonTable;
  const { head, cells, bold } = drawn(table);
  assert.deepEqual(head, columns);
  assert.deepEqual(cells[1], ['x:b', '0.90', '\u2014', '30', '']);
  assert.deepEqual(bold, ['$0.0012']);
});
