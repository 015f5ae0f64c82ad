/**
 * word_diff.ts: tokens, the common start and end set aside, the middle aligned word by word, and
 * two long answers that differ throughout shown as wholly different past the limit.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { tokens, wordDiff } from '../src/word_diff';

test('tokens are words, runs of white space and single other characters', () => {
  assert.deepEqual(tokens("The capital is Paris, isn't it?  Yes."),
    ['The', ' ', 'capital', ' ', 'is', ' ', 'Paris', ',', ' ', 'isn', "'", 't', ' ', 'it', '?', '  ', 'Yes', '.']);
});

test('the words that differ are marked, the rest kept whole', () => {
  const same = 'The capital is Paris.';
  assert.deepEqual(wordDiff(same, same), [{ kind: 'same', text: same }]);
  assert.deepEqual(wordDiff('The capital of Australia is Sydney.', 'The capital of Australia is Canberra.'), [
    { kind: 'same', text: 'The capital of Australia is ' }, { kind: 'del', text: 'Sydney' },
    { kind: 'ins', text: 'Canberra' }, { kind: 'same', text: '.' }]);
  assert.deepEqual(wordDiff('Lima is the capital.', 'Lima is the capital of Peru.'), [
    { kind: 'same', text: 'Lima is the capital' }, { kind: 'ins', text: ' of Peru' }, { kind: 'same', text: '.' }]);
  assert.deepEqual(wordDiff('Brasília é a capital.', 'Brasília não é a capital.'), [
    { kind: 'same', text: 'Brasília ' }, { kind: 'ins', text: 'não ' }, { kind: 'same', text: 'é a capital.' }]);
  assert.deepEqual(wordDiff('', 'new text'), [{ kind: 'ins', text: 'new text' }]);
});

test('each side reads whole: the left without insertions, the right without deletions', () => {
  const pieces = wordDiff('a b c d', 'b c d a');
  assert.equal(pieces.filter(p => p.kind !== 'ins').map(p => p.text).join(''), 'a b c d');
  assert.equal(pieces.filter(p => p.kind !== 'del').map(p => p.text).join(''), 'b c d a');
  assert.deepEqual(pieces.filter(p => p.kind === 'same'), [{ kind: 'same', text: 'b c d' }]);
});

test('past the limit the middles are not aligned: one deletion and one insertion', () => {
  const long = (n: number, letter: string): string => Array.from({ length: n }, (_, i) => letter + i).join(' ');
  const limited = wordDiff(long(3000, 'w'), long(3000, 'v'), 1000);
  assert.deepEqual(limited.map(p => p.kind), ['del', 'ins']);
  assert.ok(limited[0].text.startsWith('w0 w1'));
  assert.equal(wordDiff('x ' + long(50, 'w'), 'y ' + long(50, 'w')).length, 3); // within it: aligned
});
