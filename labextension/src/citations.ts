/**
 * Citations as numbered footnotes, and provider-side tool calls (web search, code execution…)
 * as cards: the saved transcript's and the live view's, as the Python fallback draws them
 * (src/ipyagent/notebook/render/citations.py).
 *
 * A source (a URL, else a document) gets one number, in the order the answer first cites it.
 * Its marker goes where the cited span ends, as private-use characters in the Markdown, and
 * becomes a <sup> only after the Markdown was rendered and sanitized: model text never makes
 * one. Links carry rel="noopener noreferrer nofollow" and load nothing.
 */

import { renderMarkdown } from './markdown';
import { LINK_REFERRER_POLICY, LINK_REL } from './policy';
import { el, imageNode, isObject, list, str } from './nodes';
import type { ServerToolPart, TextPart, TranscriptCitation, Unchecked } from './wire';

/** A citation as read from a document or the live wire, each value checked where it is read. */
type Citation = Unchecked<TranscriptCitation>;

/** A provider-side tool's card: a saved `ServerToolPart`, or the live one with the provider's
 * `progress` while it runs and its input as it streams (`partial_input`). */
export type ServerCardData = Unchecked<ServerToolPart & { progress: string; partial_input: string }>;

/** A marker in rendered text: \ue000 numbers \ue001. */
const MARK = /\ue000([0-9,]+)\ue001/g;

/** How each provider-side tool is called on a card (render/citations.py TOOL_TITLES). */
const TOOL_TITLES: { [key: string]: string } = {
  web_search: 'web search',
  web_fetch: 'web fetch',
  code_execution: 'code execution',
  file_search: 'file search',
  url_context: 'URL context'
};

export type Sources = Map<string, { n: number; citation: Citation }>;

/** What makes citations one source: the URL, else the document (or title). */
export function sourceKey(citation: Citation): string {
  return str(citation.url) ? `url:${str(citation.url)}` : `document:${str(citation.document) || str(citation.title)}`;
}

/** The sources cited by the assistant's text, numbered in order of first citation. */
export function numberSources(messages: unknown[]): Sources {
  const found: Sources = new Map();
  for (const message of messages) {
    if (!isObject(message) || message.role !== 'assistant') {
      continue;
    }
    for (const part of list(message.parts)) {
      if (!isObject(part) || part.type !== 'text') {
        continue;
      }
      for (const citation of list(part.citations)) {
        if (isObject(citation) && !found.has(sourceKey(citation))) {
          found.set(sourceKey(citation), { n: found.size + 1, citation });
        }
      }
    }
  }
  return found;
}

/** `part`'s text with a marker where each cited span ends (not inside a word). */
export function markedText(part: Unchecked<TextPart>, sources: Sources): string {
  const text = str(part.text).replace(/[\ue000\ue001]/g, '\ufffd'); // the model's own: no marker
  const at = new Map<number, Set<number>>();
  for (const citation of list(part.citations)) {
    if (!isObject(citation)) {
      continue;
    }
    const source = sources.get(sourceKey(citation));
    let end = Math.min(Math.max(typeof citation.end === 'number' ? citation.end : 0, 0), text.length);
    while (end > 0 && end < text.length && /[\p{L}\p{N}]/u.test(text[end - 1]) && /[\p{L}\p{N}]/u.test(text[end])) {
      end++;
    }
    if (source) {
      at.set(end, (at.get(end) ?? new Set()).add(source.n));
    }
  }
  let marked = text;
  for (const end of [...at.keys()].sort((a, b) => b - a)) {
    const numbers = [...at.get(end)!].sort((a, b) => a - b).join(',');
    marked = marked.slice(0, end) + `\ue000${numbers}\ue001` + marked.slice(end);
  }
  return marked;
}

/** Markdown with markers, rendered and sanitized, each marker then made a <sup>[n]</sup>. */
export function renderCited(text: string): Node[] {
  const nodes = renderMarkdown(text);
  const holder = document.createElement('div');
  holder.append(...nodes);
  const walker = document.createTreeWalker(holder, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  while (walker.nextNode()) {
    texts.push(walker.currentNode as Text);
  }
  for (const node of texts) {
    const value = node.data;
    if (!value.includes('\ue000')) {
      continue;
    }
    const pieces: Node[] = [];
    let last = 0;
    MARK.lastIndex = 0;
    for (let match = MARK.exec(value); match; match = MARK.exec(value)) {
      pieces.push(document.createTextNode(value.slice(last, match.index)));
      pieces.push(el('sup', 'ipyagent-cite', `[${match[1]}]`));
      last = match.index + match[0].length;
    }
    pieces.push(document.createTextNode(value.slice(last)));
    node.replaceWith(...pieces);
  }
  return Array.from(holder.childNodes);
}

/** A link that loads nothing until clicked, to http(s) URLs only; else the text alone. */
export function safeLink(url: string, text: string): HTMLElement {
  if (!/^https?:\/\//i.test(url)) {
    return el('span', '', text);
  }
  const a = el('a', '', text) as HTMLAnchorElement;
  a.href = url;
  a.rel = LINK_REL;
  a.setAttribute('referrerpolicy', LINK_REFERRER_POLICY);
  a.target = '_blank';
  return a;
}

function short(text: string, limit = 200): string {
  const one = text.split(/\s+/).join(' ').trim();
  return one.length <= limit ? one : one.slice(0, limit - 1) + '…';
}

/** The numbered list of sources under the answer. */
export function sourcesNode(sources: Iterable<{ n: number; citation: Citation }>): HTMLElement {
  const node = el('div', 'ipyagent-sources');
  node.append(el('div', 'ipyagent-meta', 'sources'));
  const ol = el('ol');
  for (const { citation } of [...sources].sort((a, b) => a.n - b.n)) {
    const li = el('li');
    const label = str(citation.title) || str(citation.url) || str(citation.document) || 'source';
    li.append(str(citation.url) ? safeLink(str(citation.url), label) : el('b', '', label));
    if (str(citation.location) && !str(citation.url)) {
      li.append(` · ${str(citation.location)}`);
    }
    if (str(citation.quote)) {
      li.append(' ', el('span', 'ipyagent-meta', `“${short(str(citation.quote))}”`));
    }
    ol.append(li);
  }
  node.append(ol);
  return node;
}

/** The live view's sources of one text segment, as they arrive (numbered within it). */
export function liveSourcesNode(citations: Citation[]): HTMLElement {
  const sources: Sources = new Map();
  for (const citation of citations) {
    if (!sources.has(sourceKey(citation))) {
      sources.set(sourceKey(citation), { n: sources.size + 1, citation });
    }
  }
  return sourcesNode(sources.values());
}

/** `web search` (the neutral tool), or the provider's name for a tool ipyagent does not name. */
export function serverTitle(part: ServerCardData): string {
  return TOOL_TITLES[str(part.tool)] ?? (str(part.name) || str(part.tool) || 'provider tool');
}

/** The card's summary line: the query, URL or first line of the code, and how it went. */
export function serverDetail(part: ServerCardData): string {
  const given = isObject(part.input) ? part.input : {};
  const code = str(given.code) || str(given.partial) || str(part.partial_input);
  const what =
    str(given.query) ||
    list(given.queries).map(String).join('; ') ||
    str(given.url) ||
    list(given.urls).map(String).join(', ') ||
    str(given.command) ||
    code.trim().split('\n', 1)[0];
  const sources = list(part.sources).length;
  let state = part.status === 'ok' ? 'done' : part.status === 'error' ? 'error' : str(part.progress) || 'running';
  if (part.status === 'ok' && sources) {
    state = `${sources} source${sources === 1 ? '' : 's'}`;
  }
  return [what ? short(what, 100) : '', state].filter(s => s).join(' · ');
}

function section(card: HTMLElement, label: string, text: string): void {
  const kind = label === 'code' ? 'ipyagent-args' : 'ipyagent-result';
  card.append(el('div', 'ipyagent-meta', label), el('pre', kind, text));
}

/** A provider-side tool call as a collapsed card: input (code, query…), output, error, sources,
 * images and files. `partial_input`: its input as it streams (the live view). */
export function serverCard(part: ServerCardData): HTMLElement {
  const css = 'ipyagent-tool ipyagent-server-tool' + (part.status === 'error' ? ' ipyagent-tool-error' : '');
  const card = el('details', css);
  const summary = el('summary');
  const title = el('b', 'ipyagent-tool-name', serverTitle(part));
  summary.append(title, ' ', el('span', 'ipyagent-meta', serverDetail(part)));
  card.append(summary);
  const given = isObject(part.input) ? part.input : {};
  const code = str(given.code) || str(given.command) || str(given.partial) || str(part.partial_input);
  if (code) {
    section(card, 'code', code);
  } else if (Object.keys(given).length) {
    section(card, 'input', JSON.stringify(given, null, 1));
  }
  if (str(part.output)) {
    section(card, 'output', str(part.output));
  }
  if (str(part.error)) {
    section(card, 'error', str(part.error));
  }
  const files = list(part.files).filter(isObject);
  if (files.length) {
    section(card, 'files', files.map(f => str(f.name) || str(f.id) || str(f.url) || 'file').join('\n'));
  }
  const sources = list(part.sources).filter(isObject);
  if (sources.length) {
    const ol = el('ol');
    for (const source of sources) {
      const li = el('li');
      li.append(safeLink(str(source.url), str(source.title) || str(source.url)));
      ol.append(li);
    }
    card.append(el('div', 'ipyagent-meta', 'sources'), ol);
  }
  for (const image of list(part.images).filter(isObject)) {
    const img = imageNode({ kind: 'image', mime_type: image.mime_type, data: image.data });
    if (img) {
      card.append(img);
    }
  }
  return card;
}
