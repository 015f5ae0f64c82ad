/**
 * citations.ts: footnote markers made after sanitizing (never from model text), the sources
 * list's links (http(s) only, no referrer, nothing loaded), and provider-side tool cards, as the
 * Python fallback draws them (tests/notebook/test_server_tools_views.py).
 */

import './dom';

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { markedText, numberSources, renderCited, safeLink, serverCard, sourcesNode } from '../src/citations';
import { LINK_REL } from '../src/policy';
import { renderTranscript } from '../src/transcript';

const UEFA = 'https://www.uefa.com/final';
const BBC = 'https://www.bbc.co.uk/final';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

const TEXT = {
  type: 'text',
  text: 'Spain won Euro 2024. They beat England 2–1.',
  citations: [
    { start: 0, end: 20, url: UEFA, title: 'UEFA', quote: 'Spain are champions' },
    { start: 31, end: 38, url: BBC, title: 'BBC' },
    { start: 31, end: 38, url: UEFA, title: 'UEFA' }
  ]
};
const SEARCH = {
  type: 'server_tool', id: 's1', tool: 'web_search', name: 'web_search', input: { query: 'euro 2024 winner' },
  status: 'ok', sources: [{ url: UEFA, title: 'UEFA' }, { url: 'javascript:alert(1)', title: 'bad' }]
};
const DOC = {
  format: 'ipyagent.transcript', version: 1, provider: 'anthropic:claude-sonnet-5-5', status: 'completed',
  messages: [{ role: 'assistant', parts: [SEARCH, TEXT] }]
};

function holder(nodes: Node[]): HTMLElement {
  const div = document.createElement('div');
  div.append(...nodes);
  return div;
}

describe('footnotes', () => {
  test('a marker where each cited span ends, one number per source in order of first citation', () => {
    const sources = numberSources(DOC.messages);
    assert.deepEqual([...sources.values()].map(s => s.n), [1, 2]);
    const html = holder(renderCited(markedText(TEXT, sources))).innerHTML;
    const sup = (n: string) => `<sup class="ipyagent-cite">[${n}]</sup>`;
    assert.ok(html.includes(`Spain won Euro 2024.${sup('1')} They beat England${sup('1,2')} 2–1.`), html);
  });

  test("the model's own marker characters make no footnote", () => {
    const forged = { type: 'text', text: 'Fake\ue0009\ue001 mark.', citations: [{ start: 0, end: 4, url: UEFA }] };
    const node = holder(renderCited(markedText(forged, numberSources([{ role: 'assistant', parts: [forged] }]))));
    assert.deepEqual([...node.querySelectorAll('sup')].map(s => s.textContent), ['[1]']);
  });

  test('the sources list links http(s) only, with no referrer', () => {
    const list = sourcesNode(numberSources(DOC.messages).values());
    const links = [...list.querySelectorAll('a')];
    assert.deepEqual(links.map(a => [a.getAttribute('href'), a.getAttribute('rel'), a.getAttribute('referrerpolicy')]),
      [[UEFA, LINK_REL, 'no-referrer'], [BBC, LINK_REL, 'no-referrer']]);
    assert.match(list.textContent ?? '', /“Spain are champions”/);
    assert.equal(safeLink('javascript:alert(1)', 'bad').tagName, 'SPAN');
  });

  test('the saved transcript draws the card, the markers and the sources', () => {
    const node = holder(renderTranscript(DOC));
    assert.equal(node.querySelectorAll('sup.ipyagent-cite').length, 2);
    assert.equal(node.querySelector('.ipyagent-sources ol')?.children.length, 2);
    const card = node.querySelector('details.ipyagent-server-tool')!;
    assert.match(card.querySelector('summary')?.textContent ?? '', /web search euro 2024 winner · 2 sources/);
    assert.equal(card.querySelector('a[href^="javascript"]'), null);
  });
});

describe('provider-side tool cards', () => {
  test('code, output, files and an inline chart; nothing remote', () => {
    const card = serverCard({
      type: 'server_tool', id: 'c1', tool: 'code_execution', name: 'code_interpreter',
      input: { code: 'print(2 ** 10)' },
      status: 'ok', output: '1024\n', files: [{ id: 'file_1', name: 'chart.png' }],
      images: [{ mime_type: 'image/png', data: PNG }, { mime_type: 'image/svg+xml', data: PNG }]
    });
    const texts = [...card.querySelectorAll('pre')].map(p => p.textContent);
    assert.deepEqual(texts, ['print(2 ** 10)', '1024\n', 'chart.png']);
    const images = [...card.querySelectorAll('img')];
    assert.equal(images.length, 1);
    assert.ok(images[0].getAttribute('src')!.startsWith('data:image/png;base64,'));
  });

  test('a call still running shows its input as it is written and its progress', () => {
    const card = serverCard({ type: 'server_tool', id: 'c1', tool: 'code_execution', status: 'pending',
      progress: 'interpreting', partial_input: 'import math\nprint(' });
    assert.match(card.querySelector('summary')!.textContent!, /code execution import math · interpreting/);
    assert.equal(card.querySelector('pre')!.textContent, 'import math\nprint(');
  });
});
