/**
 * The live view of a %%compare cell: one widget for the whole cell (its ES module
 * sent once, not once per provider), drawn with the saved comparison's own frame
 * (compare.ts), each run in it a `LiveView` of its own `LiveDoc`.
 *
 * Protocol (custom widget messages, kernel -> browser; notebook/views/compare_view.py):
 *   {type: "compare", panes: [{title, resolved}], runs, started: [[pane, run]], table, footer, selected}
 *                         the layout and what has happened (the answer to "hello"); `selected`:
 *                         the run the user picked in each pane (null: none picked)
 *   {type: "run", pane, run}   a run started (its pane shows it unless the user picked another)
 *   {type: "table", table}     the figures table changed (a run ended)
 *   {type: ..., key: "pane/run", ...}  a run's own message (live.ts: snapshot, ops, end)
 *   {type: "end", doc, output?}  the saved comparison record, once, at the end, and the rest of
 *                               the cell's saved output (live.ts, saved_output.ts)
 * and browser -> kernel: {type: "hello"}, {type: "select", pane, run} (the user picked a run: the
 * saved record shows it too), and a run's {type: "approve", ..., key} (live.ts).
 */

import { ComparisonFrame, renderComparison } from './compare';
import { FrameScheduler } from './frame';
import { LiveDoc, LiveView } from './live_run';
import { isObject, list, num, str } from './transcript';
import type {
  CompareMessage,
  ComparisonRecord,
  ComparisonTable,
  FrontMessage,
  KeyedRunMessage,
  PaneTitle,
  SavedOutputParts
} from './wire';

/** A run's message tagged with its key ("pane/run"), not the comparison's own. */
function isRunMessage(msg: CompareMessage | KeyedRunMessage): msg is KeyedRunMessage {
  return 'key' in msg && typeof msg.key === 'string';
}

/** A comparison as far as the browser knows it. */
export class CompareDoc {
  panes: PaneTitle[] | null = null;
  runs = 1;
  table: ComparisonTable | null = null;
  footer = '';
  started: [number, number][] = [];
  /** The run the user picked in each pane (null: none; the pane follows the newest run). */
  selected: (number | null)[] = [];
  docs = new Map<string, LiveDoc>();
  final: ComparisonRecord | null = null;
  /** The rest of the saved output the `end` message brought (saved_output.ts). */
  output: SavedOutputParts | null = null;
  /** Counts layout messages: a view rebuilds its frame when it changes. */
  resets = 0;
  listeners = new Set<() => void>();
  /** Sends a message to the kernel (the widget model's `send`); a run's go tagged with its key. */
  send: (msg: FrontMessage) => void = () => undefined;

  /** One message (wire.ts `CompareMessage`, or a run's tagged with its key). */
  receive(msg: CompareMessage | KeyedRunMessage): void {
    if (isRunMessage(msg)) {
      this.run(msg.key).receive(msg); // the run's own views redraw themselves
      if (msg.type === 'end') {
        this.listeners.forEach(listener => listener()); // the price notes under the table
      }
      return;
    }
    if (msg.type === 'compare') {
      this.panes = list(msg.panes).map(p => (isObject(p) ? { title: str(p.title), resolved: str(p.resolved) } : { title: '', resolved: '' }));
      this.runs = num(msg.runs) ?? 1;
      this.table = msg.table;
      this.footer = str(msg.footer);
      this.selected = list(msg.selected).map(num);
      this.started = [];
      for (const key of list(msg.started)) {
        this.start(num(list(key)[0]) ?? 0, num(list(key)[1]) ?? 0);
      }
      this.resets++;
    } else if (msg.type === 'run') {
      this.start(num(msg.pane) ?? 0, num(msg.run) ?? 0);
    } else if (msg.type === 'table') {
      this.table = msg.table;
    } else if (msg.type === 'end') {
      this.final = msg.doc;
      this.output = msg.output ?? null;
    } else {
      return;
    }
    this.listeners.forEach(listener => listener());
  }

  private start(pane: number, run: number): void {
    if (!this.started.some(([p, r]) => p === pane && r === run)) {
      this.started.push([pane, run]);
      this.run(`${pane}/${run}`);
    }
  }

  /** The user picked `run` in pane `pane`: kept here (a redrawn view shows it) and by the kernel (the saved record). */
  pick(pane: number, run: number): void {
    this.selected[pane] = run;
    this.send({ type: 'select', pane, run });
  }

  /** The document of one run (made on first use). */
  run(key: string): LiveDoc {
    let doc = this.docs.get(key);
    if (!doc) {
      doc = new LiveDoc();
      doc.send = msg => this.send({ ...msg, key }); // Approve / Deny in the run's cards
      this.docs.set(key, doc);
    }
    return doc;
  }
}

/** One view (one output) of a live comparison. */
export class CompareLiveView {
  readonly el: HTMLElement;
  private doc: CompareDoc;
  private frame: ComparisonFrame | null = null;
  private views = new Map<string, LiveView>();
  private resets = -1;
  private table: ComparisonTable | null | undefined = undefined;
  private scheduler: FrameScheduler;
  private ended = false;

  constructor(el: HTMLElement, doc: CompareDoc) {
    this.el = el;
    this.doc = doc;
    el.classList.add('ipyagent-transcript', 'ipyagent-comparison', 'ipyagent-live');
    this.scheduler = new FrameScheduler(() => this.draw(), doc.listeners);
  }

  dispose(): void {
    this.scheduler.dispose();
    this.views.forEach(view => view.dispose());
  }

  private draw(): void {
    const doc = this.doc;
    if (this.ended || !doc.panes) {
      return;
    }
    if (doc.final) {
      // The saved record drawn by the same frame: the same DOM, each pane keeping its selected run.
      this.ended = true;
      const selected = this.frame?.selected;
      this.views.forEach(view => view.dispose());
      this.views.clear();
      this.el.classList.remove('ipyagent-live');
      this.el.replaceChildren(...renderComparison(doc.final, selected));
      return;
    }
    if (doc.resets !== this.resets || !this.frame) {
      this.resets = doc.resets;
      this.views.forEach(view => view.dispose());
      this.views.clear();
      this.frame = new ComparisonFrame(doc.panes, doc.runs);
      doc.selected.forEach((run, pane) => run !== null && this.frame?.select(pane, run, true));
      this.frame.onPick = (pane, run) => doc.pick(pane, run);
      this.table = undefined;
      this.el.replaceChildren(...this.frame.nodes);
    }
    const frame = this.frame;
    for (const [pane, run] of doc.started) {
      const key = `${pane}/${run}`;
      if (this.views.has(key) || pane < 0 || pane >= doc.panes.length) {
        continue;
      }
      this.views.set(key, new LiveView(frame.body(pane, run), doc.run(key), false)); // price note: under the table
      frame.select(pane, run); // follow the newest run, unless the user picked one
    }
    if (doc.table !== this.table) {
      this.table = doc.table;
      frame.setTable(doc.table);
    }
    markRunStates(this.el, doc);
    frame.setPriceNotes([...doc.docs.values()].map(run => run.final));
    frame.setFooter(doc.footer);
  }
}

/**
 * Each row of the live figures table says where its run is (`data-state`): `waiting` (not started),
 * `streaming` (started, no figures yet: its first figure cell says "streaming…"; a waiting one
 * "waiting") or `done` (its figures, sent when the run ended). A row of a provider over several
 * runs is streaming once one of its runs started.
 */
export function markRunStates(root: HTMLElement, doc: CompareDoc): void {
  const keys = list(doc.table?.row_runs);
  root.querySelectorAll('.ipyagent-compare-table tbody tr').forEach((tr, i) => {
    const key = list(keys[i]);
    const [pane, run] = [num(key[0]), num(key[1])];
    const figures = Array.from(tr.children).slice(1) as HTMLElement[];
    const done = figures.some(td => !td.classList.contains('ipyagent-run-state') && (td.textContent ?? '').trim());
    const started = doc.started.some(([p, r]) => p === pane && (run === null || r === run));
    const state = done ? 'done' : started ? 'streaming' : 'waiting';
    (tr as HTMLElement).dataset.state = state;
    if (!done && figures.length) {
      figures[0].className = 'ipyagent-run-state';
      figures[0].textContent = state === 'streaming' ? 'streaming\u2026' : 'waiting';
    }
  });
}
