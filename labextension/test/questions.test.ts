/**
 * An MCP server's doings in a tool call's live card: its progress (transcript.ts `toolCard`), a
 * sampling request to approve, edit or deny and an elicitation form (questions.ts), answered with
 * the messages notebook/views/asks.py reads (wire.ts `FrontMessage`).
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { elicitationQuestion, samplingQuestion } from '../src/questions';
import { toolCard } from '../src/transcript';
import type { ElicitationAsk, FrontMessage, SamplingAsk } from '../src/wire';

const sampling: SamplingAsk = {
  kind: 'sampling',
  request: '3-1',
  server: 'ev',
  system: 'You are a test server.',
  messages: [{ role: 'user', text: 'six times seven?' }],
  max_tokens: 20,
  hints: ['claude'],
  model: '',
  editable: 'six times seven?',
  arguments: { prompt: 'six times seven?' }
};

function click(node: HTMLElement, label: string): void {
  const button = [...node.querySelectorAll('button')].find(b => b.textContent === label);
  assert.ok(button, `no ${label} button`);
  button.click();
}

test('a running call shows its progress: a bar of its total, then its result alone', () => {
  const running = toolCard({ id: 'c1', name: 'blend', progress: { progress: 3, total: 4, message: 'mixing' } });
  assert.equal(running.querySelector('summary')?.textContent, 'blend c1 · running: 3 of 4 · mixing');
  const bar = running.querySelector('progress')!;
  assert.deepEqual([bar.max, bar.value], [4, 3]);
  const open = toolCard({ id: 'c1', name: 'blend', progress: { progress: 2, total: null, message: null } });
  assert.equal(open.querySelector('progress')?.hasAttribute('max'), false); // no total: an indeterminate bar
  assert.equal(open.querySelector('.ipyagent-progress')?.textContent, 'running: 2');
  const done = toolCard({
    id: 'c1',
    name: 'blend',
    status: 'ok',
    result: 'ok',
    progress: { progress: 4, total: 4, message: null }
  });
  assert.equal(done.querySelector('progress'), null);
});

test("a call's notes are drawn under its arguments, as text", () => {
  const card = toolCard({ id: 'c1', name: 'f', status: 'ok', result: '42', notes: ['<b>sampled</b> by openai:m'] });
  const notes = [...card.querySelectorAll('.ipyagent-note')];
  assert.deepEqual(
    notes.map(n => [n.textContent, n.children.length]),
    [['<b>sampled</b> by openai:m', 0]]
  );
});

test('a sampling request: Approve sends the verdict; an edited message goes with it; Deny refuses', () => {
  const sent: FrontMessage[] = [];
  const first = samplingQuestion(sampling, msg => sent.push(msg));
  assert.match(first.node.textContent ?? '', /MCP server ev asks the model \(at most 20 tokens\)/);
  click(first.node, 'Approve');
  const second = samplingQuestion(sampling, msg => sent.push(msg));
  click(second.node, 'Edit');
  const editor = second.node.querySelector('textarea')!;
  assert.equal(editor.hidden, false);
  editor.value = 'What is six times seven?';
  click(second.node, 'Approve');
  click(samplingQuestion(sampling, msg => sent.push(msg)).node, 'Deny');
  assert.deepEqual(sent, [
    { type: 'approve', request: '3-1', verdict: true },
    { type: 'approve', request: '3-1', verdict: true, text: 'What is six times seven?' },
    { type: 'approve', request: '3-1', verdict: false }
  ]);
});

test("an elicitation form: its fields' answers go back on Accept; the kernel's errors are shown", () => {
  const ask: ElicitationAsk = {
    kind: 'elicitation',
    request: '4-1',
    server: 'ev',
    message: 'Your details',
    arguments: {},
    fields: [
      {
        name: 'name',
        kind: 'string',
        title: 'Name',
        description: '',
        required: true,
        default: null,
        options: [],
        format: null,
        minimum: null,
        maximum: null
      },
      {
        name: 'ok',
        kind: 'boolean',
        title: 'OK',
        description: '',
        required: false,
        default: true,
        options: [],
        format: null,
        minimum: null,
        maximum: null
      },
      {
        name: 'size',
        kind: 'choice',
        title: 'Size',
        description: '',
        required: false,
        default: 'm',
        options: [
          ['s', 'Small'],
          ['m', 'Medium']
        ],
        format: null,
        minimum: null,
        maximum: null
      }
    ]
  };
  const sent: FrontMessage[] = [];
  const question = elicitationQuestion(ask, msg => sent.push(msg));
  (question.node.querySelector('[data-field="name"]') as HTMLInputElement).value = 'Ada';
  click(question.node, 'Accept');
  assert.deepEqual(sent, [
    { type: 'elicit', request: '4-1', action: 'accept', content: { name: 'Ada', ok: true, size: 'm' } }
  ]);
  question.update({ ...ask, errors: { name: 'too short' } });
  const errors = [...question.node.querySelectorAll('.ipyagent-field-error')].filter(e => !(e as HTMLElement).hidden);
  assert.deepEqual(
    errors.map(e => e.textContent),
    ['too short']
  );
  assert.equal(question.node.querySelector('button')?.disabled, false); // asked again
});

test('a link elicitation opens only an http(s) link, with no referrer', () => {
  const sent: FrontMessage[] = [];
  const link = elicitationQuestion(
    {
      kind: 'elicitation',
      request: '5-1',
      server: 'ev',
      message: 'Sign in',
      url: 'https://example.org/a',
      arguments: {}
    },
    msg => sent.push(msg)
  );
  const anchor = link.node.querySelector('a')!;
  assert.deepEqual(
    [anchor.href, anchor.rel, anchor.target],
    ['https://example.org/a', 'noopener noreferrer nofollow', '_blank']
  );
  click(link.node, 'Done');
  assert.deepEqual(sent, [{ type: 'elicit', request: '5-1', action: 'accept' }]);
  const bad = elicitationQuestion(
    { kind: 'elicitation', request: '5-2', server: 'ev', message: 'Sign in', url: '', arguments: {} },
    () => undefined
  );
  assert.equal(bad.node.querySelector('a'), null);
});
