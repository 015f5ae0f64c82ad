/**
 * numbers.ts `fixed`: figures written as Python's format writes them. Each expected string is
 * Python's `f"{value:.{digits}f}"` (a value exactly halfway goes to the even digit, where
 * JavaScript's toFixed goes up).
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fixed, usd } from '../src/numbers';

const CASES: [number, number, string][] = [
  [1.25, 1, '1.2'],
  [1.35, 1, '1.4'],
  [0.125, 2, '0.12'],
  [0.375, 2, '0.38'],
  [2.5, 0, '2'],
  [3.5, 0, '4'],
  [12.5, 0, '12'],
  [0.5, 0, '0'],
  [1.5, 0, '2'],
  [-1.25, 1, '-1.2'],
  [-2.5, 0, '-2'],
  [0.0123, 2, '0.01'],
  [2.345, 2, '2.35'],
  [1.005, 2, '1.00'],
  [0.000125, 6, '0.000125'],
  [43, 0, '43'],
  [0, 2, '0.00'],
  [1e-7, 6, '0.000000']
];

test('values are written as Python writes them; only an exact half differs from toFixed', () => {
  assert.deepEqual(
    CASES.map(([value, digits]) => fixed(value, digits)),
    CASES.map(([, , python]) => python)
  );
  assert.equal((1.25).toFixed(1), '1.3'); // what the renderers wrote before
});

test("a cost is written as render/evaluation.usd writes it", () => {
  const cases: [number | null, string][] = [
    [null, '—'],
    [0, '$0'],
    [0.123456, '$0.1235'],
    [0.012345, '$0.0123'],
    [0.001234, '$0.001234'],
    [0.000125, '$0.000125'],
    [0.0000004, '$0'],
    [12.5, '$12.5000']
  ];
  assert.deepEqual(cases.map(([value]) => usd(value)), cases.map(([, python]) => python));
});
