/**
 * A saved evaluation's statistics, filters and grades as drawn (evaluation.ts with
 * evaluation_stats.ts, matrix_filters.ts, grading.ts, evaluation_cell.ts): the figures and the
 * verdict under the summary, the filters' rows, the grade a click asks for (and what the cell
 * says when no one answers), the human mark, and a redraw keeping the open cells and the filter.
 */

import { body } from './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { renderEvaluation } from '../src/evaluation';
import { GRADE_EVENT, GradeEventDetail, NO_KERNEL } from '../src/grading';

function run(row: number, column: string, passed: boolean, text: string, extra: object = {}): object {
  return { row, column, provider: column, repeat: 0, prompt: `q${row}`, fields: { n: row }, status: 'ok', text, passed,
    outcomes: [{ name: 'contains:x', passed, score: null, reason: null }], run_id: `r${row}${column}`, ...extra };
}

function doc(id: string): { [key: string]: unknown } {
  return {
    id, providers: ['a', 'b'], columns: ['a', 'b'], assertions: ['contains:x'], total: 6, wall_s: 1,
    results: [
      run(0, 'a', true, 'x one'), run(0, 'b', true, 'x one'), run(1, 'a', true, 'x two'),
      run(1, 'b', false, 'y two', { human: false, human_note: 'wrong' }), run(2, 'a', true, 'x 3'),
      run(2, 'b', false, 'y')],
    summary: [
      { column: 'a', runs: 3, pass_rate: 1, pass_low: 0.44, pass_high: 1, score: null, verdict: 'baseline',
        total_p50_s: 0.5 },
      { column: 'b', runs: 3, pass_rate: 1 / 3, pass_low: 0.06, pass_high: 0.79, score: null, difference: -2 / 3,
        difference_low: -1, difference_high: -0.33, p_value: 0.5, verdict: 'no significant difference',
        total_p50_s: 0.4 }],
    comparisons: [{ baseline: 'a', column: 'b', sentence: SENTENCE }],
    agreement: [{ check: 'judge:j', n: 2, percent: 50, kappa: 0 }], changes: null,
    row_flags: { failed: [1, 2], disagree: [1, 2], changed: [] }
  };
}

const SENTENCE = 'no significant difference (n=3, need ≈ 783 rows to detect a 10-point gap)';

function texts(root: Element, selector: string): (string | null)[] {
  return [...root.querySelectorAll(selector)].map(n => n.textContent);
}

/** The matrix's cell of the `row`-th row shown, `column`-th column (0: '#', 1: the row, then the columns). */
function cellAt(root: HTMLElement, row: number, column: number): HTMLElement {
  return root.querySelectorAll('.ipyagent-eval-matrix tbody tr')[row].querySelectorAll('td')[column];
}

function rows(root: HTMLElement): string[] {
  return [...root.querySelectorAll('.ipyagent-eval-matrix tbody tr')].map(tr => tr.children[0].textContent ?? '');
}

test('the statistics, the verdict and the judge agreement are drawn under the summary', () => {
  const [root] = renderEvaluation(doc('e1'));
  const [first, second] = [...root.querySelectorAll('.ipyagent-eval-stats tbody tr')].map(tr => texts(tr, 'td'));
  assert.deepEqual(first, ['a', '3', '100% (44%–100%)', '—', '0.50', '—', '', '', 'baseline']);
  assert.deepEqual(second, ['b', '3', '33% (6%–79%)', '—', '0.40', '—', '-67 (-100 to -33)', '0.500',
    'no significant difference']);
  assert.equal(root.querySelector('.ipyagent-eval-verdict')?.textContent, `b vs a: ${SENTENCE}`);
  assert.deepEqual(texts(root, '.ipyagent-eval-agreement td'), ['judge:j', '2', '50%', '0.00']);
});

test('filters show the rows the document flags; "changed" is off without an earlier run', () => {
  const [root] = renderEvaluation(doc('e2'));
  body().append(root);
  assert.deepEqual(rows(root), ['0', '1', '2']);
  (root.querySelector("button[data-filter='failed']") as HTMLButtonElement).click();
  assert.deepEqual(rows(root), ['1', '2']);
  assert.equal(root.querySelector("button[data-filter='failed']")?.textContent, 'failures only (2)');
  assert.equal((root.querySelector("button[data-filter='changed']") as HTMLButtonElement).disabled, true);
  // Drawn again (a grade came back): the same filter, and the open cell still open.
  const cell = cellAt(root, 0, 3).querySelector('details') as HTMLDetailsElement;
  cell.open = true;
  cell.dispatchEvent(new Event('toggle'));
  const [again] = renderEvaluation(doc('e2'));
  assert.deepEqual(rows(again), ['1', '2']);
  assert.equal((cellAt(again, 0, 3).querySelector('details') as HTMLDetailsElement).open, true);
});

test('a graded cell carries its mark apart from the automatic one, and its grade controls', () => {
  const [root] = renderEvaluation(doc('e3'));
  const graded = cellAt(root, 1, 3);
  assert.equal(graded.querySelector('summary')?.textContent, '✗ y two human ✗');
  assert.equal((graded.querySelector('.ipyagent-eval-grade-note') as HTMLInputElement).value, 'wrong');
  assert.equal(graded.querySelector('.ipyagent-eval-grade-status')?.textContent, 'graded fail');
  const pressed = [...graded.querySelectorAll('.ipyagent-eval-grade-button')]
    .map(b => [b.textContent, b.getAttribute('aria-pressed')]);
  assert.deepEqual(pressed, [['✓ pass', 'false'], ['✗ fail', 'true'], ['clear', 'false']]);
});

test('a click asks for the grade with a DOM event; unanswered, the cell says grading needs the kernel', () => {
  const [root] = renderEvaluation(doc('e4'));
  body().append(root);
  const cell = cellAt(root, 2, 2);
  (cell.querySelector('.ipyagent-eval-grade-note') as HTMLInputElement).value = 'fine';
  const buttons = cell.querySelectorAll<HTMLButtonElement>('.ipyagent-eval-grade-button');
  buttons[0].click();
  assert.equal(cell.querySelector('.ipyagent-eval-grade-status')?.textContent, NO_KERNEL);
  const asked: GradeEventDetail[] = [];
  const answer = (event: Event): void => {
    event.preventDefault();
    asked.push((event as CustomEvent).detail);
  };
  document.addEventListener(GRADE_EVENT, answer);
  try {
    buttons[1].click();
    assert.deepEqual(asked.map(d => d.request), [
      { evaluation: 'e4', row: 2, column: 'a', repeat: 0, passed: false, note: 'fine', run_id: 'r2a' }]);
    assert.equal(cell.querySelector('.ipyagent-eval-grade-status')?.textContent, 'saving…');
    assert.equal(buttons[0].disabled, true);
    asked[0].done('not graded: the kernel said no');
    assert.equal(cell.querySelector('.ipyagent-eval-grade-status')?.textContent, 'not graded: the kernel said no');
    assert.equal(buttons[0].disabled, false);
  } finally {
    document.removeEventListener(GRADE_EVENT, answer);
  }
});

test('a cell compares its answer with another column word by word', () => {
  const [root] = renderEvaluation(doc('e5'));
  const cell = cellAt(root, 1, 3);
  const select = cell.querySelector('select.ipyagent-eval-diff-select') as HTMLSelectElement;
  assert.deepEqual([...select.options].map(o => o.textContent), ['—', 'a']);
  select.selectedIndex = 1;
  select.dispatchEvent(new Event('change'));
  assert.deepEqual(texts(cell, '.ipyagent-diff del'), ['y']);
  assert.deepEqual(texts(cell, '.ipyagent-diff ins'), ['x']);
});
