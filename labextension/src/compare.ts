/**
 * A comparison (%%compare) on screen: one pane per provider, its runs selectable
 * ("run 1 · 2 · 3") instead of stacked, the figures table under the panes (one row
 * per provider with the median, and one per run), and a footer line.
 *
 * The saved record (index.ts, `renderComparison`) and the live widget (live.ts)
 * build the same DOM with `ComparisonFrame`, so the cell does not re-flow when
 * the comparison ends. Every string is set as text, never as HTML.
 */

import { comparisonDiff } from './compare_diff';
import { el, isObject, list, num, priceNoteNodes, priceNotes, renderTranscript, str } from './transcript';
import type { ComparisonRecord, ComparisonTable, PaneTitle, Unchecked } from './wire';

interface Pane {
  node: HTMLElement;
  tabs: HTMLButtonElement[];
  bodies: Map<number, HTMLElement>;
  selected: number;
  /** The user picked a run: a new run starting does not take the pane away from it. */
  pinned: boolean;
}

/** The panes, the table and the footer of one comparison. */
export class ComparisonFrame {
  readonly nodes: HTMLElement[];
  readonly runs: number;
  private panes: Pane[];
  private tableHolder: HTMLElement;
  /** Why the runs' prices are unknown, once under the table (not in each pane). */
  private notesHolder: HTMLElement;
  private notesKey = '[]';
  private footer: HTMLElement;
  private table: Unchecked<ComparisonTable> | null = null;
  /** Each pane's title as the user typed it (an alias), naming its provider's row in the table. */
  private titles: string[];
  /** Told when the user picks a run (a tab or a table row): the live view tells the kernel. */
  onPick: ((index: number, run: number) => void) | null = null;

  constructor(titles: PaneTitle[], runs: number) {
    this.runs = Math.max(1, Math.floor(runs) || 1);
    this.titles = titles.map(t => t.title);
    const grid = el('div', 'ipyagent-grid');
    grid.style.gridTemplateColumns = `repeat(${Math.min(Math.max(titles.length, 1), 3)}, minmax(0, 1fr))`;
    this.panes = titles.map((title, index) => this.pane(title, index));
    grid.append(...this.panes.map(p => p.node));
    this.tableHolder = el('div', 'ipyagent-compare-figures');
    this.notesHolder = el('div', 'ipyagent-price-notes');
    this.footer = el('div', 'ipyagent-footer ipyagent-compare-footer', '\u00a0');
    this.nodes = [grid, this.tableHolder, this.notesHolder, this.footer];
  }

  private pane(title: PaneTitle, index: number): Pane {
    const node = el('div', 'ipyagent-pane');
    node.dataset.index = String(index);
    const head = el('div', 'ipyagent-pane-title');
    head.append(el('b', '', title.title));
    if (title.resolved && title.resolved !== title.title) {
      head.append(' ', el('span', 'ipyagent-meta', title.resolved));
    }
    node.append(head);
    const pane: Pane = { node, tabs: [], bodies: new Map(), selected: 0, pinned: false };
    if (this.runs > 1) {
      const bar = el('div', 'ipyagent-runs');
      bar.setAttribute('role', 'tablist');
      bar.append(el('span', 'ipyagent-meta', 'run '));
      for (let run = 0; run < this.runs; run++) {
        const tab = el('button', 'ipyagent-run-tab', String(run + 1)) as HTMLButtonElement;
        tab.type = 'button';
        tab.setAttribute('role', 'tab');
        tab.title = `show run ${run + 1} of ${this.runs}`;
        tab.dataset.run = String(run);
        tab.disabled = true; // until the run has started
        tab.addEventListener('click', () => this.select(index, run, true));
        if (run > 0) {
          bar.append(el('span', 'ipyagent-meta', ' · '));
        }
        bar.append(tab);
        pane.tabs.push(tab);
      }
      node.append(bar);
    }
    return pane;
  }

  /** The element holding run `run` of pane `index` (made on first use; shown when selected). */
  body(index: number, run: number): HTMLElement {
    const pane = this.panes[index];
    let body = pane.bodies.get(run);
    if (!body) {
      body = el('div', 'ipyagent-run ipyagent-transcript');
      body.dataset.run = String(run);
      body.setAttribute('role', 'tabpanel');
      pane.bodies.set(run, body);
      const later = [...pane.bodies.entries()].filter(([r]) => r > run).sort((a, b) => a[0] - b[0])[0];
      pane.node.insertBefore(body, later ? later[1] : null);
      if (pane.tabs[run]) {
        pane.tabs[run].disabled = false;
      }
      this.show(pane);
    }
    return body;
  }

  /** Show run `run` of pane `index`; `byUser`: it stays shown when later runs start. */
  select(index: number, run: number, byUser = false): void {
    const pane = this.panes[index];
    if (!pane || (!byUser && pane.pinned)) {
      return;
    }
    pane.selected = run;
    pane.pinned = pane.pinned || byUser;
    this.show(pane);
    this.markRows();
    if (byUser && this.onPick) {
      this.onPick(index, run);
    }
  }

  /** The run selected in each pane. */
  get selected(): number[] {
    return this.panes.map(p => p.selected);
  }

  private show(pane: Pane): void {
    pane.bodies.forEach((body, run) => (body.hidden = run !== pane.selected));
    pane.tabs.forEach((tab, run) => tab.setAttribute('aria-selected', String(run === pane.selected)));
  }

  /** The figures table ({columns, rows, row_runs}); the same for a live and a saved comparison. */
  setTable(table: unknown): void {
    this.table = isObject(table) ? table : null;
    const node = figuresTable(table, (index, run) => this.select(index, run, true), this.titles);
    this.tableHolder.replaceChildren(...(node ? [node] : []));
    this.markRows();
  }

  /** The price notes of the runs' transcripts, each once, under the table (redrawn only when they change:
   * a live comparison calls this on every frame). */
  setPriceNotes(transcripts: Iterable<unknown>): void {
    const notes = priceNotes(transcripts);
    const key = JSON.stringify(notes);
    if (key !== this.notesKey) {
      this.notesKey = key;
      this.notesHolder.replaceChildren(...priceNoteNodes(notes));
    }
  }

  setFooter(text: string): void {
    this.footer.textContent = text || '\u00a0';
  }

  /** Highlight each pane's selected run in the table. */
  private markRows(): void {
    const keys = this.table ? list(this.table.row_runs) : [];
    this.tableHolder.querySelectorAll('tbody tr').forEach((tr, i) => {
      const key = list(keys[i]);
      const run = num(key[1]);
      const pane = this.panes[num(key[0]) ?? -1];
      tr.classList.toggle('ipyagent-selected', run !== null && pane !== undefined && pane.selected === run && this.runs > 1);
    });
  }
}

/**
 * The figures table: column titles, one row of cell texts per provider (the median and
 * range over its runs), then, with several runs, one row per run. `row_runs` gives each
 * row's [pane, run] (run null for a provider's row); clicking a run's row shows that run.
 * A provider's row is named by its pane's title (an alias) first, the id dim after it
 * (render/html.py `with_titles`); a figure of `marks` (fastest, cheapest, fewest tokens) is marked.
 */
export function figuresTable(table: unknown, onSelect?: (index: number, run: number) => void,
  titles: string[] = []): HTMLElement | null {
  if (!isObject(table)) {
    return null;
  }
  const { columns, rows, gone } = withoutUnknownCost(
    list(table.columns).map(str), list(table.rows).map(r => list(r).map(str)));
  const node = el('table', 'ipyagent-compare-table');
  const head = el('tr');
  for (const title of columns) {
    head.append(el('th', '', title));
  }
  const thead = el('thead');
  const tbody = el('tbody');
  thead.append(head);
  node.append(thead, tbody);
  const keys = list(table.row_runs);
  const marks = new Map<string, string>();
  for (const mark of list(table.marks).filter(isObject)) {
    const column = num(mark.column) ?? -1;
    if (column !== gone) {
      marks.set(`${num(mark.row)}/${column - (column > gone ? 1 : 0)}`, str(mark.label));
    }
  }
  rows.forEach((cells, i) => {
    const tr = el('tr');
    const key = list(keys[i]);
    const index = num(key[0]);
    const run = num(key[1]);
    cells.forEach((cell, c) => {
      const td = el('td', c === cells.length - 1 && cell ? 'ipyagent-error' : '', cell);
      const title = c === 0 && run === null && index !== null ? titles[index] : undefined;
      if (title && cell && title !== cell.split(' · ')[0]) {
        td.replaceChildren(title, el('span', 'ipyagent-meta', ` · ${cell}`));
      }
      const mark = marks.get(`${i}/${c}`);
      if (mark) {
        td.classList.add('ipyagent-best');
        td.title = mark;
      }
      tr.append(td);
    });
    if (index !== null && run !== null) {
      tr.className = 'ipyagent-run-row';
      tr.dataset.index = String(index);
      tr.dataset.run = String(run);
      if (onSelect) {
        tr.addEventListener('click', () => onSelect(index, run));
      }
    }
    tbody.append(tr);
  });
  return node;
}

/**
 * `columns` and `rows` less the cost column when no run's price is known ("—" or empty in every
 * row; the price note under the output says so once); `gone`: the index of the column left out,
 * else the number of columns (render/html.py `without_unknown_cost`).
 */
export function withoutUnknownCost(columns: string[], rows: string[][]):
  { columns: string[]; rows: string[][]; gone: number } {
  const n = columns.indexOf('cost');
  if (n < 0 || rows.some(r => n < r.length && r[n] !== '' && r[n] !== '\u2014')) {
    return { columns, rows, gone: columns.length };
  }
  const drop = <T>(r: T[]): T[] => [...r.slice(0, n), ...r.slice(n + 1)];
  return { columns: drop(columns), rows: rows.map(drop), gone: n };
}

/** The panes' titles of a saved comparison (`titles` as typed, `providers` resolved). */
export function paneTitles(data: Unchecked<ComparisonRecord>): PaneTitle[] {
  const providers = list(data.providers).map(str);
  const titles = list(data.titles).map(str);
  return providers.map((resolved, i) => ({ title: titles[i] || resolved, resolved }));
}

/**
 * The nodes of a saved comparison; `selected`: the run shown in each pane (default: the run the
 * user picked while it streamed, the record's `selected`, else the pane's last run).
 */
export function renderComparison(data: unknown, selected?: number[]): HTMLElement[] {
  if (!isObject(data) || data.format !== 'ipyagent.comparison') {
    return [el('div', 'ipyagent-error', '⚠ this output is not an ipyagent comparison')];
  }
  const frame = new ComparisonFrame(paneTitles(data), num(data.runs) ?? 1);
  const last = new Map<number, number>();
  const runs = new Set<string>();
  for (const entry of list(data.entries)) {
    const index = isObject(entry) ? num(entry.index) : null;
    if (!isObject(entry) || index === null || index < 0 || index >= frame.selected.length) {
      continue;
    }
    const run = num(entry.run) ?? 0;
    frame.body(index, run).append(...renderTranscript(entry.transcript, false)); // its price note: under the table
    last.set(index, Math.max(run, last.get(index) ?? 0));
    runs.add(`${index}/${run}`);
  }
  const picked = list(data.selected);
  last.forEach((run, index) => {
    const choice = selected?.[index] ?? num(picked[index]);
    frame.select(index, choice !== null && runs.has(`${index}/${choice}`) ? choice : run);
  });
  frame.setTable(data.table);
  frame.setPriceNotes(list(data.entries).map(entry => (isObject(entry) ? entry.transcript : null)));
  frame.setFooter(list(data.footer).map(str).join(' · ')); // computed by the Python side (core/figures.py)
  return [...frame.nodes, ...comparisonDiff(data, paneTitles(data).map(t => t.title), () => frame.selected)];
}
