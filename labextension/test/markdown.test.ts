/**
 * markdown.ts `settled` and `MarkdownStream`: a streaming answer's unfinished end shows no
 * half-parsed syntax (the Python twin's cases: tests/notebook/test_streamed_html.py).
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MarkdownStream, settled, unclosedAt } from '../src/markdown';

/** What a live view draws of `text`, streamed in one piece. */
function drawn(text: string): HTMLElement {
  const node = document.createElement('div');
  const stream = new MarkdownStream(node);
  stream.append(text);
  stream.render();
  return node;
}

/** The words a node shows, white space collapsed. */
const text = (node: Node): string => (node.textContent ?? '').replace(/\s+/g, ' ').trim();

test('an open strong, code span or link at the end is drawn as its plain text', () => {
  for (const [source, shown] of [
    ['A **Short', 'A **Short'],
    ['A **Short answer*', 'A **Short answer*'], // markdown-it alone: *<em>Short answer</em>
    ['Run `code *here*', 'Run `code *here*'], // not <em>here</em> before the code span closes
    ['See [link](htt', 'See [link](htt'],
    ['See [**the docs**', 'See [**the docs**'],
    ['See [the docs]', 'See [the docs]']
  ]) {
    const node = drawn(source);
    assert.equal(text(node), shown);
    assert.equal(node.querySelector('em, strong, code, a'), null, shown);
  }
});

test('what is closed is drawn as Markdown; the plain text starts at the first open construct', () => {
  const node = drawn('**Done** and `x` and [a](https://example.com) then *open');
  assert.deepEqual(
    [...node.querySelectorAll('strong, code, a')].map(n => n.tagName),
    ['STRONG', 'CODE', 'A']
  );
  assert.ok(text(node).endsWith('then *open'));
  assert.equal(settled('*a* **b**'), '*a* **b**');
  assert.equal(settled('x **b *c'), 'x \\*\\*b \\*c');
  assert.equal(unclosedAt('2 * 3 = 6'), -1); // a lone `*` between spaces opens nothing
  assert.equal(unclosedAt('snake_case_name'), -1); // nor does an intraword `_`
  assert.equal(unclosedAt('``a ` b'), 0); // a code span closes with a run of its own length only
});

test('a list item still forming is held back: no empty <li>', () => {
  for (const source of ['- one\n- ', '- one\n-', '1. one\n2.', '- one\n  - ', '- one\n- \n']) {
    const node = drawn(source);
    const items = [...node.querySelectorAll('li')];
    assert.deepEqual(items.map(li => li.textContent!.trim()), ['one'], JSON.stringify(source));
  }
  assert.equal(drawn('- one\n- t').querySelectorAll('li').length, 2);
  assert.equal(drawn('Title\n#').querySelector('h1'), null);
});

test('code: an open fence is drawn as code, its opening line held back until it is whole', () => {
  assert.equal(settled('Text\n```py'), 'Text\n');
  assert.equal(drawn('Text\n```py\nx = *a').querySelector('pre code')!.textContent, 'x = *a');
  assert.equal(settled('```\n**x'), '```\n**x'); // inside code nothing is escaped
  assert.equal(settled('    **x'), '    **x');
});

test('a frame parses only the tail: the finished blocks are kept as they were drawn', () => {
  const node = document.createElement('div');
  const stream = new MarkdownStream(node);
  stream.append('First paragraph with *emphasis*.\n\nSecond\n**Sho');
  stream.render();
  const first = node.firstChild;
  stream.append('rt** and on\n\nThird');
  stream.render();
  assert.equal(node.firstChild, first);
  assert.equal(node.querySelectorAll('strong').length, 1);
  assert.equal(text(node), 'First paragraph with emphasis. Second Short and on Third');
});

test('an answer table: a numeric column is right-aligned, a text one not, a `:-:` column keeps its own', () => {
  const table = '| name | score | share | mark |\n|---|---|---|:-:|\n| a | 1,200 | 5% | 3 |\n| b | 3.5 ms | — | x |\n| c | v2 | 7% | 1 |\n';
  const node = drawn(table);
  const align = (row: number) => [...node.querySelectorAll('tr')[row].children].map(c => (c as HTMLElement).style.textAlign);
  assert.deepEqual(align(0), ['', '', 'right', 'center']);
  assert.deepEqual(align(1), ['', '', 'right', 'center']);
  assert.equal(drawn(table.replace('v2', '12')).querySelectorAll('td[style*="right"]').length, 6);
});
