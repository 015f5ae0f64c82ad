/**
 * evaluation_live.ts: the live matrix draws the page the kernel sent, and asks the kernel for the
 * next, the previous page and a filter's first page, never filtering or paging by itself.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EvaluationDoc, EvaluationLiveView, pagerNode } from '../src/evaluation_live';
import type { EvaluationMessage, EvaluationPage, FrontMessage, Json } from '../src/wire';

function run(row: number, column: string, passed: boolean): Json {
  return { row, column, provider: column, repeat: 0, status: 'ok', passed, text: `answer ${row}`,
    fields: { n: row }, outcomes: [] };
}

function pageMessage(start: number, rows: number[], filter: EvaluationPage['filter'] = 'all'): EvaluationMessage {
  const doc: Json = { id: 'e1', providers: ['x:a'], columns: ['x:a'], repeat: 1, total: 120, summary: [],
    results: rows.map(n => run(n, 'x:a', n % 2 === 0)), field_order: ['n'], row_flags: {} };
  return { type: 'page', page: { start, size: 50, filter, matching: filter === 'all' ? 120 : 60, rows, fields: {} },
    doc, progress: '12 / 120 runs', note: '', counts: { all: 120, failed: 60, disagree: 0, changed: 0 }, summary: [] };
}

function range(start: number, end: number): number[] {
  return Array.from({ length: end - start }, (_, i) => start + i);
}

test('the pager says where the page is and asks for the next and the previous page', () => {
  const asked: number[] = [];
  const page: EvaluationPage = { start: 50, size: 50, filter: 'all', matching: 120, rows: range(50, 100), fields: {} };
  const bar = pagerNode(page, start => asked.push(start));
  assert.equal(bar.querySelector('.ipyagent-eval-pager-place')?.textContent, 'rows 51–100 of 120');
  bar.querySelectorAll('button').forEach(b => (b as HTMLButtonElement).click());
  assert.deepEqual(asked, [0, 100]);
  const first = pagerNode({ ...page, start: 0, rows: range(0, 50) }, () => undefined);
  assert.equal((first.querySelector('button') as HTMLButtonElement).disabled, true); // no previous page
  const last = pagerNode({ ...page, start: 100, rows: range(100, 120) }, () => undefined);
  assert.equal((last.querySelectorAll('button')[1] as HTMLButtonElement).disabled, true); // no next page
});

test('the live view draws the page sent, and a filter or a page is asked of the kernel', async () => {
  const doc = new EvaluationDoc();
  const sent: FrontMessage[] = [];
  doc.send = msg => sent.push(msg);
  const root = document.createElement('div');
  const view = new EvaluationLiveView(root, doc);
  doc.receive(pageMessage(50, range(50, 100)));
  await new Promise(resolve => setTimeout(resolve, 50)); // the next animation frame
  const rows = [...root.querySelectorAll('.ipyagent-eval-matrix tbody tr')].map(tr => tr.children[0].textContent);
  assert.deepEqual(rows, range(50, 100).map(String));
  assert.equal(root.querySelector('.ipyagent-eval-progress')?.textContent, '12 / 120 runs');
  assert.match(root.querySelector('button[data-filter="failed"]')?.textContent ?? '', /\(60\)/);
  (root.querySelector('.ipyagent-eval-pager button') as HTMLButtonElement).click(); // previous
  (root.querySelector('button[data-filter="failed"]') as HTMLButtonElement).click();
  assert.deepEqual(sent, [{ type: 'page', start: 0, filter: 'all' }, { type: 'page', start: 0, filter: 'failed' }]);
  // The progress alone: the line and the counts change, the rows drawn stay (an open cell stays open).
  const row = root.querySelector('.ipyagent-eval-matrix tbody tr');
  doc.receive({ type: 'progress', progress: '13 / 120 runs', note: '', counts: { all: 120, failed: 61 }, summary: [] });
  await new Promise(resolve => setTimeout(resolve, 50));
  assert.equal(root.querySelector('.ipyagent-eval-progress')?.textContent, '13 / 120 runs');
  assert.match(root.querySelector('button[data-filter="failed"]')?.textContent ?? '', /\(61\)/);
  assert.equal(root.querySelector('.ipyagent-eval-matrix tbody tr'), row);
  view.dispose();
});
