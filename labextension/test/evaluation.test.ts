/**
 * evaluation.ts: a saved matrix of repeats and variants as a person reads it, as render/evaluation.py
 * draws it: k/N passed per cell, striped when the repeats disagree, a row never sent with its reason,
 * and the headline's columns, repeats, budget and flaky count.
 */

import './dom';

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { headline, reloadLine, renderEvaluation, repeatsClass } from '../src/evaluation';

function run(row: number, repeat: number, passed: boolean | null, status = 'ok', error: string | null = null) {
  return {
    row, repeat, column: 'openai:m/terse', provider: 'openai:m', variant: 'terse', prompt: 'p', fields: { value: 'a' },
    text: status === 'ok' ? 'ans' : '', passed, status, error, error_type: status === 'ok' ? null : 'template',
    outcomes: status === 'ok' ? [{ name: 'contains:x', passed, score: null, reason: null }] : []
  };
}

const DOC = {
  providers: ['openai:m'], columns: ['openai:m/terse'], variants: ['terse'], repeat: 2, total: 4,
  assertions: ['contains:x'], wall_s: 0.5, budget: 0.5, spent: 0.48, reserved: 0, skipped: 0,
  id: '3f2a9c1b7e0d', flaky: [[0, 'openai:m/terse']], summary: [], notes: [],
  results: [run(0, 0, true), run(0, 1, false), run(1, 0, null, 'template_error', 'row 1: no field'),
            run(1, 1, null, 'template_error', 'row 1: no field')]
};

describe('a matrix of repeats and variants', () => {
  test('a cell says k/N passed, striped when its repeats disagree; a row never sent says why', () => {
    const [root] = renderEvaluation(DOC);
    const cells = [...root.querySelectorAll('.ipyagent-eval-cell')];
    assert.equal(cells.length, 2);
    assert.ok(cells[0].classList.contains('ipyagent-eval-flaky'));
    assert.equal(cells[0].querySelector('summary')?.textContent, '≈ 1/2 passed · ans');
    assert.equal(cells[0].querySelectorAll('.ipyagent-eval-title').length, 2); // each repeat's detail
    assert.ok(cells[1].classList.contains('ipyagent-eval-template'));
    assert.equal(cells[1].querySelector('summary')?.textContent, '? row 1: no field');
    assert.deepEqual([...root.querySelectorAll('th')].map(th => th.textContent).slice(-1), ['openai:m/terse']);
  });

  test("a row's fields keep the rows' order, though a saved notebook sorts their keys", () => {
    const sorted = { ...run(0, 0, true), repeat: 0, fields: { capital: 'Paris', country: 'France' } };
    const doc = { ...DOC, repeat: 1, total: 1, flaky: [], results: [sorted], field_order: ['country', 'capital'] };
    const [root] = renderEvaluation(doc);
    const label = root.querySelectorAll('.ipyagent-eval-matrix tbody td')[1];
    assert.equal(label.textContent, 'country=France, capital=Paris');
  });

  test("the last line names the evaluation's id, by which the run store gives it back", () => {
    const [root] = renderEvaluation(DOC);
    const line = 'evaluation 3f2a9c1b7e0d · ipyagent.load_evaluation("3f2a9c1b7e0d") reads it back';
    assert.equal(reloadLine(DOC), line);
    assert.equal(root.lastElementChild?.textContent, line);
  });

  test('the headline names columns, repeats, the budget and the flaky cells', () => {
    assert.equal(
      headline(DOC),
      '1 columns (1 providers × 1 variants) × 2 rows × 2 repeats: 2 of 4 runs, 1 passed (contains x), 500 ms; ' +
        'budget $0.5000: spent $0.4800, reserved $0, 0 runs skipped; 1 flaky (repeats disagree)'
    );
    assert.equal(repeatsClass([run(0, 0, true), run(0, 1, true)]), 'pass');
    assert.equal(repeatsClass([run(0, 0, false), run(0, 1, null, 'skipped')]), 'fail');
  });
});

describe('a saved matrix cut to its size limit (issue 33)', () => {
  const saved = {
    rows: 3000, results: 6000, done: 6000, cached: 0, passed: 5950, rows_shown: 1,
    preview: 300, note: '1 of 3,000 rows shown, failing and disagreeing rows first; 2,999 rows not shown'
  };
  const cut = { ...run(0, 0, false), text: 'x'.repeat(300) + '…', text_chars: 1200 };
  const doc = { ...DOC, repeat: 1, total: 6000, flaky: [], budget: null, results: [cut], saved };

  test('the headline counts every run, not the rows shown; the note says how many are left out', () => {
    const head = '1 columns (1 providers × 1 variants) × 6000 rows: 6000 of 6000 runs, 5950 passed';
    assert.ok(headline(doc).startsWith(head));
    const [root] = renderEvaluation(doc);
    assert.equal(root.querySelector('.ipyagent-eval-saved')?.textContent, saved.note);
    assert.equal(root.querySelectorAll('.ipyagent-eval-matrix tbody tr').length, 1);
  });

  test('a cut answer says it is the first 300 of its characters', () => {
    const [root] = renderEvaluation(doc);
    const metas = [...root.querySelectorAll('.ipyagent-eval-cell .ipyagent-meta')].map(m => m.textContent);
    assert.ok(metas.includes('the first 300 of 1,200 characters'));
    const [whole] = renderEvaluation(DOC);
    assert.equal(whole.querySelector('.ipyagent-eval-saved'), null);
  });
});
