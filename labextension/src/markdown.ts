/**
 * Markdown -> sanitized DOM, whole or as it streams.
 *
 * The engine and options are the Python side's (markdown-it-py in render.py):
 * CommonMark with tables and strikethrough, raw HTML escaped. Code blocks are
 * highlighted by highlight.js (class names only, so they pass the sanitizer)
 * and get a copy button.
 *
 * `MarkdownStream` renders text that grows at its end in time proportional to
 * what changed: the blocks that can no longer change are rendered once and
 * kept; each frame re-renders only the tail (the last blocks).
 */

import MarkdownIt from 'markdown-it';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

import { inertMarkdown, sanitizeToFragment } from './safe_html';

const LANGUAGES = { bash, c, cpp, css, go, java, javascript, json, markdown, python, rust, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) {
  hljs.registerLanguage(name, language);
}

/** Code blocks longer than this are not highlighted (highlighting is per frame while they grow). */
const HIGHLIGHT_LIMIT = 20_000;

function highlight(code: string, lang: string): string {
  const name = lang.trim().toLowerCase();
  if (!name || code.length > HIGHLIGHT_LIMIT || !hljs.getLanguage(name)) {
    return '';
  }
  try {
    return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
  } catch {
    return '';
  }
}

/** The one Markdown engine of the live view and the saved transcript (images made inert). */
export const md = inertMarkdown(
  new MarkdownIt('commonmark', {
    html: false,
    linkify: false,
    breaks: false,
    highlight
  }).enable(['table', 'strikethrough'])
);

/** Markdown to sanitized nodes, code blocks given copy buttons. */
export function renderMarkdown(text: string): Node[] {
  const fragment = sanitizeToFragment(md.render(text));
  for (const pre of Array.from(fragment.querySelectorAll('pre'))) {
    addCopyButton(pre);
  }
  return Array.from(fragment.childNodes);
}

/** A copy button on a code block (made here, never from model HTML). */
export function addCopyButton(pre: HTMLElement): void {
  pre.classList.add('ipyagent-code');
  pre.prepend(copyButton(() => pre.querySelector('code')?.textContent ?? pre.textContent ?? '', 'copy code'));
}

/** A small button that copies `text()` to the clipboard. */
export function copyButton(text: () => string, title: string): HTMLButtonElement {
  const button = document.createElement('button');
  button.className = 'ipyagent-copy-button';
  button.type = 'button';
  button.title = title;
  button.setAttribute('aria-label', title);
  // The label is CSS generated content, so it is never part of the text (copying, innerText).
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    const done = (word: string) => {
      button.dataset.state = word;
      setTimeout(() => delete button.dataset.state, 1200);
    };
    navigator.clipboard?.writeText(text()).then(() => done('copied'), () => done('failed'));
  });
  return button;
}

/**
 * Markdown that grows at its end, rendered into `node`.
 *
 * Blocks before the last block that starts on a complete line cannot change
 * whatever follows (CommonMark reads block structure line by line; only the
 * last block can absorb new lines), so they are rendered once and kept. Each
 * `render` parses and renders from the first unfinished block to the end.
 */
export class MarkdownStream {
  readonly node: HTMLElement;
  /** Frames rendered, and characters parsed by them (tests and benchmarks read these). */
  frames = 0;
  parsedChars = 0;
  private source = '';
  private stable = 0;
  private tail: Node[] = [];
  private dirty = false;

  constructor(node: HTMLElement) {
    this.node = node;
  }

  get text(): string {
    return this.source;
  }

  append(text: string): void {
    if (text) {
      this.source += text;
      this.dirty = true;
    }
  }

  /** Replace the whole text (a snapshot); rendered from scratch. */
  reset(text: string): void {
    this.source = text;
    this.stable = 0;
    this.tail = [];
    this.node.replaceChildren();
    this.dirty = true;
  }

  /** Bring the DOM up to date with the text; does nothing when nothing changed. */
  render(): void {
    if (!this.dirty) {
      return;
    }
    this.dirty = false;
    this.frames++;
    let rest = this.source.slice(this.stable);
    const cut = finishedPrefix(rest);
    if (cut > 0) {
      const keep = renderMarkdown(rest.slice(0, cut));
      const anchor = this.tail.length ? this.tail[0] : null;
      for (const node of keep) {
        this.node.insertBefore(node, anchor);
      }
      this.parsedChars += cut;
      this.stable += cut;
      rest = rest.slice(cut);
    }
    for (const node of this.tail) {
      node.parentNode?.removeChild(node);
    }
    this.tail = renderMarkdown(rest);
    this.parsedChars += rest.length;
    this.node.append(...this.tail);
  }
}

/**
 * The length of the head of `source` made of blocks that are finished: those
 * before the last top-level block that starts on a complete line (0: none).
 */
export function finishedPrefix(source: string): number {
  const tokens = md.parse(source, {});
  const starts: number[] = [];
  for (const token of tokens) {
    if (token.level === 0 && token.nesting !== -1 && token.map) {
      starts.push(token.map[0]);
    }
  }
  let completeLines = 0;
  for (let i = source.indexOf('\n'); i !== -1; i = source.indexOf('\n', i + 1)) {
    completeLines++;
  }
  for (let k = starts.length - 1; k >= 1; k--) {
    if (starts[k] < completeLines && starts[k] > starts[k - 1]) {
      return lineOffset(source, starts[k]);
    }
  }
  return 0;
}

function lineOffset(source: string, line: number): number {
  let offset = 0;
  for (let i = 0; i < line; i++) {
    offset = source.indexOf('\n', offset) + 1;
  }
  return offset;
}
