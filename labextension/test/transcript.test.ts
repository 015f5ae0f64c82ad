/**
 * transcript.ts: a saved run drawn from its document. The footer is the Python side's (drawn as
 * written); a tool call's state reads as Python's `tool_status` says it; images load nothing;
 * a malformed document is drawn as far as it goes, never thrown on.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { artifactNode, footerText, imageNode, renderTranscript, toolCard, toolStatus } from '../src/transcript';

const words = (nodes: Node[]): string =>
  nodes
    .map(n => n.textContent ?? '')
    .join(' ')
    .split(/\s+/)
    .filter(w => w)
    .join(' ');

test('the footer is drawn as the Python side wrote it, never computed here', () => {
  const footer = ['openai:m', '3 in / 4 out tokens', 'something new'];
  assert.equal(
    footerText({ provider: 'x', status: 'failed', footer }),
    'openai:m · 3 in / 4 out tokens · something new'
  );
  // A document written before documents had their footer: its provider and state.
  assert.equal(footerText({ provider: 'openai:m', status: 'failed' }), 'openai:m · failed');
  assert.equal(footerText({ provider: 'openai:m', status: 'completed' }), 'openai:m');
  assert.equal(footerText({ footer: 'not a list' }), 'unknown');
});

test('tool call states read as notebook/render/transcript.tool_status writes them', () => {
  assert.equal(toolStatus({ status: 'ok', duration_s: 0.0123 }), 'done in 0.01 s');
  assert.equal(toolStatus({ status: 'error', duration_s: 0.5 }), 'error in 0.50 s');
  assert.equal(toolStatus({ status: 'ok' }), 'done');
  assert.equal(toolStatus({ status: 'pending' }), 'not run');
  assert.equal(toolStatus({}), 'not run');
  assert.equal(toolStatus({ status: 'error', approval: 'denied' }), 'denied');
  assert.equal(toolStatus({ status: 'ok', approval: 'approved', duration_s: 1 }), 'approved by you · done in 1.00 s');
  assert.equal(toolStatus({ status: 'pending', approval: 'approved' }), 'approved by you');
  assert.equal(toolStatus({ status: 'ok', approval: 'preapproved', duration_s: 1 }),
    'approved in advance · done in 1.00 s');
  assert.equal(
    toolStatus({ status: 'error', stopped: 'timeout', duration_s: 1.25 }),
    'stopped at the deadline after 1.25 s'
  );
  assert.equal(toolStatus({ status: 'error', stopped: 'interrupted' }), 'interrupted');
});

test('a tool card: name, id and state, arguments, result; a failed call is marked, a denied one is not', () => {
  const card = toolCard({ id: 'c1', name: 'f', arguments: { x: 1 }, status: 'error', result: 'boom', duration_s: 0.5 });
  assert.equal(card.className, 'ipyagent-tool ipyagent-tool-error');
  const blocks = [card.querySelector('summary'), ...card.querySelectorAll(':scope > div, :scope > pre')];
  assert.deepEqual(
    blocks.map(b => b?.textContent),
    ['f c1 · error in 0.50 s', 'arguments', '{\n "x": 1\n}', 'error', 'boom']
  );
  assert.equal(toolCard({ id: 'c2', name: 'g', status: 'error', approval: 'denied' }).className, 'ipyagent-tool');
  assert.equal(
    toolCard({ id: 'c3', name: 'h', partial_arguments: '{"q": "pa' }).querySelector('pre')?.textContent,
    '{"q": "pa'
  );
});

test('an image part is drawn only from base64 raster data', () => {
  const png = imageNode({ kind: 'image', mime_type: 'image/png', data: 'iVBO\nRw0"><script>' });
  assert.equal(png?.getAttribute('src'), 'data:image/png;base64,iVBORw0script');
  assert.equal(imageNode({ kind: 'image', mime_type: 'image/svg+xml', data: 'PHN2Zz4=' }), null);
  assert.equal(imageNode({ kind: 'audio', mime_type: 'image/png', data: 'AAAA' }), null);
});

test('an artifact: its title, and its preview when opened', () => {
  const node = artifactNode({
    namespace: 'web-1',
    kind: 'text',
    size: { chars: 12000 },
    tool: 'WebSearch',
    preview: 'Jupyter…'
  });
  assert.equal(node.querySelector('summary')?.textContent, 'web-1: text, 12,000 chars, from WebSearch');
  assert.equal(
    artifactNode({ size: { rows: 1500, columns: 4 } }).querySelector('summary')?.textContent,
    'artifact: unknown, 1,500 rows × 4 columns'
  );
});

test('a transcript in reading order; a malformed one drawn as far as it goes', () => {
  const doc = {
    format: 'ipyagent.transcript',
    version: 1,
    provider: 'openai:m',
    status: 'interrupted',
    messages: [
      { role: 'user', parts: [{ type: 'text', text: 'not drawn: the prompt is the cell above' }] },
      {
        role: 'assistant',
        parts: [
          { type: 'reasoning', text: 'think' },
          { type: 'text', text: 'Hello **there**' },
          { type: 'tool_call', id: 'c1', name: 'f', status: 'ok', result: '1' },
          { type: 'other', kind: 'x', summary: '<x>' }
        ]
      }
    ],
    error: { type: 'server', message: 'boom' },
    footer: ['openai:m', 'interrupted']
  };
  const nodes = renderTranscript(doc);
  assert.deepEqual(
    nodes.map(n => n.className.split(' ')[0]),
    [
      'ipyagent-reasoning',
      'ipyagent-text',
      'ipyagent-tool',
      'ipyagent-meta',
      'ipyagent-error',
      'ipyagent-status',
      'ipyagent-footer'
    ]
  );
  assert.equal(words([nodes[1]]), 'Hello there');
  assert.equal(words(nodes.slice(4)), '⚠ boom ■ interrupted; the text above is partial openai:m · interrupted');
  const odd = renderTranscript({
    format: 'ipyagent.transcript',
    provider: 7,
    messages: 'x',
    artifacts: [1, null],
    footer: [1]
  });
  assert.deepEqual(
    odd.map(n => n.className),
    ['ipyagent-footer']
  );
  assert.equal(words(renderTranscript({ format: 'other' })), '⚠ this output is not an ipyagent transcript');
});
