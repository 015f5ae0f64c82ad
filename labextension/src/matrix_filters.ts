/**
 * The matrix's filters: all rows, failures only, disagreements only (the columns' pass rates on
 * the row differ), rows changed since the cell's last run. The rows of each come with the
 * document (`row_flags`, agent/evaluation/analysis.py), so filtering reads no answer.
 */

import { Json, el, isObject, list, num } from './transcript';

export type Filter = 'all' | 'failed' | 'disagree' | 'changed';

const LABELS: [Filter, string][] = [
  ['all', 'all rows'], ['failed', 'failures only'], ['disagree', 'disagreements only'],
  ['changed', 'changed since the last run']
];

function flagged(doc: Json, filter: Filter): Set<number> {
  const flags = isObject(doc.row_flags) ? doc.row_flags : {};
  return new Set(list(flags[filter]).map(num).filter((n): n is number => n !== null));
}

/** The rows `filter` keeps, in order. */
export function filteredRows(doc: Json, rows: number[], filter: Filter): number[] {
  if (filter === 'all') {
    return rows;
  }
  const keep = flagged(doc, filter);
  return rows.filter(n => keep.has(n));
}

/** The filter buttons, each with its count; `onChange` is told the filter picked. */
export function filterBar(doc: Json, rows: number[], current: Filter, onChange: (filter: Filter) => void): HTMLElement {
  const counts = Object.fromEntries(LABELS.map(([f]) => [f, filteredRows(doc, rows, f).length]));
  return filterButtons(counts, current, isObject(doc.changes), onChange);
}

/** The filter buttons with the rows each keeps (`counts`; the live matrix's come from the kernel);
 * `changes`: an earlier run of the cell is known (else "changed" is disabled). */
export function filterButtons(counts: { [filter: string]: number | undefined }, current: Filter, changes: boolean,
  onChange: (filter: Filter) => void): HTMLElement {
  const bar = el('div', 'ipyagent-eval-filters');
  bar.setAttribute('role', 'toolbar');
  bar.append(el('span', 'ipyagent-meta', 'show '));
  const buttons: HTMLButtonElement[] = [];
  for (const [filter, label] of LABELS) {
    const text = filter === 'all' ? label : `${label} (${counts[filter] ?? 0})`;
    const node = el('button', 'ipyagent-eval-filter', text) as HTMLButtonElement;
    node.type = 'button';
    node.dataset.filter = filter;
    node.setAttribute('aria-pressed', String(filter === current));
    if (filter === 'changed' && !changes) {
      node.disabled = true;
      node.title = 'no earlier run of this cell in the run store';
    }
    node.addEventListener('click', () => {
      buttons.forEach(b => b.setAttribute('aria-pressed', String(b === node)));
      onChange(filter);
    });
    buttons.push(node);
    bar.append(node);
  }
  return bar;
}
