/**
 * The live matrix of a %%compare --over cell: one page of rows at a time, asked of the kernel
 * (src/ipyagent/notebook/views/evaluation_pages.py), drawn with the saved evaluation's own
 * renderer (evaluation.ts), so a 10,000-row evaluation costs the page what a 50-row one does.
 *
 * Protocol (custom widget messages; wire.ts `EvaluationMessage`):
 *   kernel -> browser  {type: "page", page, doc, progress, note, counts, summary}  the page shown
 *                      {type: "progress", progress, note, counts, summary?}        the rest only
 *                      (the summary at most once a second: the last one is kept)
 *   browser -> kernel  {type: "hello"}, {type: "page", start, filter}  (previous, next, a filter)
 * A grade clicked in a cell goes to the kernel as in a saved matrix (grading.ts); the kernel
 * sends the page again with it.
 */

import { LivePage, renderEvaluation } from './evaluation';
import { FrameScheduler } from './frame';
import { Filter, filterButtons } from './matrix_filters';
import { el, isObject } from './transcript';
import type { EvaluationMessage, EvaluationPage, EvaluationProgress, FrontMessage, Json } from './wire';

/** A live evaluation as far as the browser knows it: the last page and the last progress. */
export class EvaluationDoc {
  page: EvaluationPage | null = null;
  doc: Json | null = null;
  progress: EvaluationProgress | null = null;
  listeners = new Set<() => void>();
  /** Sends a message to the kernel (the widget model's `send`). */
  send: (msg: FrontMessage) => void = () => undefined;

  receive(msg: EvaluationMessage): void {
    if (msg.type === 'page') {
      this.page = msg.page;
      this.doc = msg.doc;
    } else if (msg.type !== 'progress') {
      return;
    }
    const summary = msg.summary ?? this.progress?.summary; // the last one sent
    this.progress = { progress: msg.progress, note: msg.note, counts: msg.counts, summary };
    this.listeners.forEach(listener => listener());
  }

  /** Ask for the page starting at `start` among the rows `filter` keeps. */
  ask(start: number, filter: Filter): void {
    this.send({ type: 'page', start: Math.max(start, 0), filter });
  }
}

function pagerButton(label: string, title: string, enabled: boolean, onClick: () => void): HTMLButtonElement {
  const node = el('button', 'ipyagent-eval-pager-button', label) as HTMLButtonElement;
  node.type = 'button';
  node.title = title;
  node.disabled = !enabled;
  node.addEventListener('click', onClick);
  return node;
}

/** "rows 51–100 of 3,000" with previous / next. */
export function pagerNode(page: EvaluationPage, ask: (start: number) => void): HTMLElement {
  const bar = el('div', 'ipyagent-eval-pager');
  const last = page.start + page.rows.length;
  const of = page.matching.toLocaleString('en-US');
  const text = page.rows.length ? `rows ${page.start + 1}–${last} of ${of}` : `0 of ${of} rows`;
  bar.append(
    pagerButton('‹ previous', 'the previous page of rows', page.start > 0, () => ask(page.start - page.size)),
    el('span', 'ipyagent-meta ipyagent-eval-pager-place', text),
    pagerButton('next ›', 'the next page of rows', last < page.matching, () => ask(page.start + page.size))
  );
  return bar;
}

/** Draws an `EvaluationDoc`: the progress line, then the page as the saved matrix draws it. A
 * message that brings no page redraws the progress line and the filters' counts only, so a cell's
 * open detail, its grade note being typed and the scroll stay as they are. */
export class EvaluationLiveView {
  private readonly scheduler: FrameScheduler;
  private readonly head = el('div', 'ipyagent-evaluation ipyagent-eval-live-head');
  private readonly body = el('div');
  private drawn: Json | null = null;

  constructor(private readonly node: HTMLElement, private readonly doc: EvaluationDoc) {
    node.classList.add('ipyagent-eval-live');
    node.replaceChildren(this.head, this.body);
    this.scheduler = new FrameScheduler(() => this.draw(), doc.listeners);
  }

  private drawHead(): void {
    const progress = this.doc.progress;
    const nodes: HTMLElement[] = [];
    if (progress?.progress) { // none once the evaluation ended: its headline says it all
      nodes.push(el('div', 'ipyagent-eval-title ipyagent-eval-progress', progress.progress));
      if (progress.note) {
        nodes.push(el('div', 'ipyagent-meta', progress.note));
      }
    }
    this.head.replaceChildren(...nodes);
  }

  private filterBar(page: EvaluationPage, doc: Json): HTMLElement {
    return filterButtons(this.doc.progress?.counts ?? {}, page.filter, isObject(doc.changes),
      filter => this.doc.ask(0, filter));
  }

  private draw(): void {
    const { page, doc, progress } = this.doc;
    this.drawHead();
    if (!page || !doc) {
      this.body.replaceChildren(el('div', 'ipyagent-meta', 'waiting for the first rows…'));
      return;
    }
    if (doc === this.drawn) {
      this.body.querySelector('.ipyagent-eval-filters')?.replaceWith(this.filterBar(page, doc));
      return;
    }
    this.drawn = doc;
    const fields = new Map<number, unknown>(Object.entries(page.fields).map(([n, f]) => [Number(n), f]));
    const pager = pagerNode(page, start => this.doc.ask(start, page.filter));
    const live: LivePage = { rows: page.rows, fields, bar: this.filterBar(page, doc), pager };
    this.body.replaceChildren(...renderEvaluation({ ...doc, summary: progress?.summary ?? doc.summary }, live));
  }

  dispose(): void {
    this.scheduler.dispose();
    this.node.replaceChildren();
  }
}
