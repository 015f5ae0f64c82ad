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
 * kept; each frame re-renders only the tail (the last blocks), its unfinished
 * end drawn plainly (`settled`).
 */

import MarkdownIt from 'markdown-it';
import type Token from 'markdown-it/lib/token.mjs';
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

/**
 * A table cell that reads as a number: a sign, a currency, digits with separators, a decimal part,
 * then `%` or a short unit (`12 ms`). The same expression as render/html.py's `_NUMBER`.
 */
const NUMBER = /^[-+\u2212]?[$\u20ac\u00a3\u00a5]?\d[\d,]*(?:\.\d+)?(?:%|\s?[a-zA-Z\u00b5]{1,3})?$/;
/** A cell that says nothing (empty, a dash): neither a number nor text. */
const BLANK = /^[-\u2013\u2014]?$/;

/**
 * markdown-it core rule: the columns of a Markdown table whose body cells are all numbers (blanks
 * aside) and which have no alignment of their own (`:--:`) are right-aligned (`style="text-align:right"`
 * on their th and td). As render/html.py's `_numeric_columns`.
 */
function numericColumns(state: { tokens: Token[] }): void {
  const tokens = state.tokens;
  for (let k = 0; k < tokens.length; k++) {
    if (tokens[k].type !== 'table_open') {
      continue;
    }
    const columns = new Map<number, Token[]>();
    const numeric = new Map<number, boolean>();
    let column = 0;
    for (; tokens[k].type !== 'table_close'; k++) {
      const token = tokens[k];
      if (token.type === 'tr_open') {
        column = 0;
      } else if (token.type === 'th_open' || token.type === 'td_open') {
        columns.set(column, [...(columns.get(column) ?? []), token]);
        const text = tokens[k + 1].type === 'inline' ? tokens[k + 1].content.trim() : '';
        if (token.type === 'td_open' && !BLANK.test(text)) {
          numeric.set(column, (numeric.get(column) ?? true) && NUMBER.test(text));
        }
        column++;
      }
    }
    for (const [index, cells] of columns) {
      if (numeric.get(index) && !cells[0].attrGet('style')) {
        cells.forEach(cell => cell.attrSet('style', 'text-align:right'));
      }
    }
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
md.core.ruler.push('numeric_columns', numericColumns);

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
    this.tail = renderMarkdown(settled(rest));
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

/** A line that is only a list item's marker, or a heading's: drawn, it would be an empty bullet or heading. */
const BARE_MARKER = /^[ \t]*(?:[-+*]|\d{1,9}[.)]|#{1,6})[ \t]*\n?$/;
/** The characters that start or end inline syntax: a backslash before each makes it plain text. */
const INLINE_SYNTAX = /[\\`*_~[\]]/g;

/**
 * The tail of a streaming answer as it may be drawn now: Markdown whose unfinished end shows no
 * half-parsed syntax (renderers of streamed Markdown "remend" the last block the same way).
 *
 * - An emphasis, strong, strikethrough, code span or link still open in the last block (not
 *   closed by the end of `source`) is plain text from its opening character on: a backslash is
 *   put before each of `` \ ` * _ ~ [ ] `` there, so `**Short` shows `**Short`, never a
 *   broken `*<em>Short</em>`, until its closing `**` arrives.
 * - A last line that is only a list marker (`-`, `1.`) or `#`s is held back: no empty bullet
 *   or heading while an item forms.
 * - A code fence's opening line still being written (```` ```py ```` without its newline) is
 *   held back; an open fenced or indented code block is drawn as it is (its text is literal).
 *
 * Cost: one block-level parse and one scan of `source` (the live view passes only its tail).
 * The Python twin is `render.streamed_html.settled`; both must give the same text.
 */
export function settled(source: string): string {
  const lineStart = source.lastIndexOf('\n', source.length - 2) + 1;
  if (BARE_MARKER.test(source.slice(lineStart))) {
    return source.slice(0, lineStart);
  }
  const lastLine = source.slice(0, source.length - (source.endsWith('\n') ? 1 : 0)).split('\n').length - 1;
  const block = lastBlock(source, lastLine);
  if (!block || block.type === 'code_block') {
    return source;
  }
  if (block.type === 'fence') {
    const open = block.map![0] === lastLine && !source.endsWith('\n');
    return open ? source.slice(0, lineStart) : source;
  }
  const start = lineOffset(source, block.map![0]);
  const open = unclosedAt(source.slice(start));
  if (open < 0) {
    return source;
  }
  return source.slice(0, start + open) + source.slice(start + open).replace(INLINE_SYNTAX, '\\$&');
}

/** The innermost block of `source` that holds line `line` (null: none, e.g. a blank line). */
function lastBlock(source: string, line: number): { type: string; map: [number, number] | null } | null {
  const tokens: { type: string; map: [number, number] | null; nesting: number }[] = [];
  md.block.parse(source, md, {}, tokens as never);
  for (let k = tokens.length - 1; k >= 0; k--) {
    const map = tokens[k].map;
    if (map && tokens[k].nesting !== -1 && map[0] <= line && line < map[1]) {
      return tokens[k];
    }
  }
  return null;
}

const isSpace = (c: string): boolean => c === '' || /\s/.test(c);
const isPunct = (c: string): boolean => c !== '' && /[!-/:-@[-`{-~\p{P}\p{S}]/u.test(c);

/**
 * Where the first inline construct of `text` (a block's source lines) that is still open at its
 * end begins (-1: none): an emphasis / strong (`*`, `_`) or strikethrough (`~~`) run that can open
 * (CommonMark's flanking rules) and is not closed, a code span with no closing backtick run of its
 * length, a `[` not closed, or a link whose `(destination` is not closed.
 */
export function unclosedAt(text: string): number {
  const openers: { ch: string; len: number; pos: number }[] = [];
  const brackets: number[] = [];
  const at = (k: number): string => (k >= 0 && k < text.length ? text[k] : '');
  const first = (): number => Math.min(...openers.map(o => o.pos), ...brackets, Infinity);
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\') {
      i += 2;
    } else if (c === '`') {
      let j = i;
      while (at(j) === '`') j++;
      const close = closingTicks(text, j, j - i);
      if (close < 0) {
        return Math.min(first(), i);
      }
      i = close;
    } else if (c === '*' || c === '_' || c === '~') {
      let j = i;
      while (at(j) === c) j++;
      delimiterRun(c, i, j, at(i - 1), at(j), openers);
      i = j;
    } else if (c === '[') {
      brackets.push(i++);
    } else if (c === ']' && brackets.length) {
      const b = brackets.pop()!;
      i++;
      if (at(i) === '(') {
        const end = destinationEnd(text, i);
        if (end < 0) {
          return Math.min(first(), b);
        }
        i = end;
      } else if (at(i) === '') {
        return Math.min(first(), b); // `[text]`: a `(destination)` may follow
      }
      for (let k = openers.length - 1; k >= 0 && openers[k].pos > b; k--) {
        openers.pop(); // emphasis does not cross a link's text
      }
    } else {
      i++;
    }
  }
  const open = first();
  return open === Infinity ? -1 : open;
}

/** A run of `ch` (`text[i:j]`) between `before` and `after`: closes the openers it can, then may open. */
function delimiterRun(ch: string, i: number, j: number, before: string, after: string,
  openers: { ch: string; len: number; pos: number }[]): void {
  let len = j - i;
  if (ch === '~' && len !== 2) {
    return; // strikethrough is exactly `~~`
  }
  const left = !isSpace(after) && (!isPunct(after) || isSpace(before) || isPunct(before));
  const right = !isSpace(before) && (!isPunct(before) || isSpace(after) || isPunct(after));
  const canOpen = ch === '_' ? left && (!right || isPunct(before)) : left;
  const canClose = ch === '_' ? right && (!left || isPunct(after)) : right;
  if (canClose) {
    for (let k = openers.length - 1; k >= 0 && len > 0; k--) {
      if (openers[k].ch !== ch) {
        continue;
      }
      const used = Math.min(len, openers[k].len);
      openers[k].len -= used;
      len -= used;
      if (openers[k].len === 0) {
        openers.splice(k); // closed, with what opened inside it and stayed open
      }
      break;
    }
  }
  if (len > 0 && canOpen) {
    openers.push({ ch, len, pos: j - len });
  }
}

/** The index after the run of exactly `n` backticks that closes a code span opened before `from` (-1: none). */
function closingTicks(text: string, from: number, n: number): number {
  for (let k = text.indexOf('`', from); k !== -1; k = text.indexOf('`', k)) {
    let j = k;
    while (text[j] === '`') j++;
    if (j - k === n) {
      return j;
    }
    k = j;
  }
  return -1;
}

/** The index after the `)` that ends a link destination opened at `text[open]` (`(`), -1: not yet. */
function destinationEnd(text: string, open: number): number {
  let depth = 0;
  for (let k = open; k < text.length; k++) {
    const c = text[k];
    if (c === '\\') {
      k++;
    } else if (c === '(') {
      depth++;
    } else if (c === ')' && --depth === 0) {
      return k + 1;
    } else if (c === '\n' && text[k + 1] === '\n') {
      return -1;
    }
  }
  return -1;
}
