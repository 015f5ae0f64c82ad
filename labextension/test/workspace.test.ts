/**
 * The notebook as the agent's workspace (workspace.ts): the kernel's requests done on a notebook
 * model, and a change's preview above Approve / Deny (live_run.ts `approvalBar`).
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { INotebookModel } from '@jupyterlab/notebook';

import { approvalBar } from '../src/live_run';
import { answer } from '../src/workspace_ops';

interface FakeCell {
  type: string;
  id: string;
  source: string;
  outputs: unknown[];
  executionCount: number | null;
}

/** A notebook model with what workspace.ts uses of one. */
function fakeModel(cells: FakeCell[]): INotebookModel {
  const wrap = (cell: FakeCell) => ({
    type: cell.type,
    id: cell.id,
    get executionCount() {
      return cell.executionCount;
    },
    set executionCount(value: number | null) {
      cell.executionCount = value;
    },
    sharedModel: { getSource: () => cell.source, setSource: (s: string) => (cell.source = s) },
    outputs: {
      toJSON: () => [...cell.outputs],
      clear: () => (cell.outputs = []),
      add: (o: unknown) => cell.outputs.push(o)
    }
  });
  return {
    cells: {
      get length() {
        return cells.length;
      },
      get: (n: number) => wrap(cells[n])
    },
    sharedModel: {
      insertCell: (index: number, cell: { cell_type: string; source: string }) => {
        const id = `new-${index}`;
        cells.splice(index, 0, { type: cell.cell_type, id, source: cell.source, outputs: [], executionCount: null });
      }
    }
  } as unknown as INotebookModel;
}

const start = (): FakeCell[] => [
  { type: 'markdown', id: 'a', source: '# Title', outputs: [], executionCount: null },
  {
    type: 'code',
    id: 'b',
    source: 'x = 1',
    outputs: [{ output_type: 'stream', name: 'stdout', text: 'hi\n' }],
    executionCount: 3
  }
];

test('cells come back with their sources, outputs and counts', () => {
  type Cells = { cells: Array<{ source: string; execution_count: unknown }> };
  const data = answer(fakeModel(start()), { request: '1', op: 'cells' }) as Cells;
  assert.deepEqual(data.cells.map(c => [c.source, c.execution_count]), [['# Title', null], ['x = 1', 3]]);
});

test('insert, edit and set_outputs change the model', () => {
  const cells = start();
  const model = fakeModel(cells);
  answer(model, { op: 'insert', index: 2, source: 'print(42)', cell_type: 'code' });
  answer(model, { op: 'edit', index: 2, source: 'print(6 * 7)' });
  const out = [{ output_type: 'stream', name: 'stdout', text: '42\n' }];
  type Cell = { cell: { source: string; outputs: unknown[]; execution_count: unknown } };
  const data = answer(model, { op: 'set_outputs', index: 2, outputs: out, execution_count: 4 }) as Cell;
  assert.deepEqual([data.cell.source, data.cell.outputs, data.cell.execution_count], ['print(6 * 7)', out, 4]);
  assert.equal(cells.length, 3);
});

test('a cell that does not exist is an error naming the range', () => {
  const model = fakeModel(start());
  const range = /there is no cell 5: cells are numbered 0 to 1/;
  assert.throws(() => answer(model, { op: 'edit', index: 5, source: '' }), range);
  assert.throws(() => answer(fakeModel(start()), { op: 'insert', index: 3, source: '' }), /there is no cell 3/);
  assert.throws(() => answer(model, { op: 'set_outputs', index: 0, outputs: [] }), /not a code cell/);
  assert.throws(() => answer(fakeModel(start()), { op: 'run', index: 0 }), /unknown notebook operation "run"/);
});

test('the approval bar shows a change as text, lines marked added or removed', () => {
  const diff = '--- cell 1 (now)\n+++ cell 1 (after)\n-x = 1\n+x = 2\n<img src=x onerror=alert(1)>';
  const bar = approvalBar(() => undefined, diff);
  const lines = [...bar.querySelectorAll('.ipyagent-preview span')].map(s => [s.className, s.textContent]);
  assert.deepEqual(lines.slice(2, 4), [['ipyagent-removed', '-x = 1\n'], ['ipyagent-added', '+x = 2\n']]);
  assert.equal(bar.querySelector('img'), null); // text, never HTML
  assert.equal(approvalBar(() => undefined).querySelector('.ipyagent-preview'), null);
});
