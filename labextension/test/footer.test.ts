/**
 * transcript.ts's footer: the figure saying how many values the redactor kept from the model,
 * as notebook/render/transcript.py's masked_figure says it (the live view and a reopened
 * notebook show the same footer).
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { footerFigures, maskedText } from '../src/transcript';

test('the masked figure counts every value and names each block', () => {
  assert.equal(maskedText({ 'cell template': 1, error: 2 }), '3 values masked (cell template 1, error 2)');
  assert.equal(maskedText({ cfg: 1 }), '1 value masked (cfg 1)');
});

test('no count, zero counts or something else says nothing', () => {
  for (const value of [undefined, null, {}, { cfg: 0 }, 'three', [1, 2]]) {
    assert.equal(maskedText(value), '');
  }
});

test('the footer carries it before the run state', () => {
  const figures = footerFigures({ provider: 'openai:m', status: 'failed', masked: { error: 2 } });
  assert.deepEqual(figures.slice(-2), ['2 values masked (error 2)', 'failed']);
});
