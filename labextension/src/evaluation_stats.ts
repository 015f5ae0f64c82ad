/**
 * An evaluation's statistics under its summary, mirroring notebook/render/evaluation_stats.py:
 * per column the pass rate with its 95% interval, the mean score with its interval, median
 * seconds and cost, and against the baseline the paired difference in points, McNemar's p and
 * the verdict; then each verdict in words, the judges' agreement with the people's grades, and
 * what changed since the cell's last run. Every string is set as text, never as HTML.
 */

import { fixed, usd } from './numbers';
import { Json, el, isObject, list, num, str } from './transcript';

const STATS = ['column', 'runs', 'pass rate (95% CI)', 'mean score (95% CI)', 'median s', 'median cost',
  'vs baseline, points (95% CI)', 'McNemar p', 'verdict'];
const AGREEMENT = ['judge', 'runs graded', 'agreement', "Cohen's κ"];

/**
 * (the name a person gave `column`: its provider's alias, with `/VARIANT`; the full column name, or
 * '' when that is the name) (evaluation_stats.column_label). A document saved before aliases: ids.
 */
export function columnLabel(doc: Json, column: string): [string, string] {
  const aliases = isObject(doc.aliases) ? doc.aliases : {};
  for (const provider of list(doc.providers).map(str)) {
    const alias = aliases[provider];
    if (typeof alias === 'string' && (column === provider || column.startsWith(provider + '/'))) {
      return [alias + column.slice(provider.length), column];
    }
  }
  return [column, ''];
}

/** `columnLabel` as one text: "small (openai:gpt-6-luna)", or the column's name (evaluation_stats.column_title). */
export function columnTitle(doc: Json, column: string): string {
  const [name, full] = columnLabel(doc, column);
  return full ? `${name} (${full})` : name;
}

/**
 * An id (or a column) breaking only after a ':' or '/', never inside the model's name (evaluation_stats.id_html):
 * each part unbroken, a <wbr> between.
 */
export function idNodes(text: string): Node[] {
  const parts = text.match(/[^:/]*[:/]?/g)?.filter(part => part) ?? [];
  return parts.flatMap((part, i) => [...(i ? [el('wbr')] : []), el('span', 'ipyagent-id', part)]);
}

/** `columnTitle` drawn: the alias, then "(the full id)" dim (evaluation_stats.title_html). */
export function titleNodes(doc: Json, column: string): Node[] {
  const [name, full] = columnLabel(doc, column);
  if (!full) {
    return idNodes(name);
  }
  const meta = el('span', 'ipyagent-meta');
  meta.append('(', ...idNodes(full), ')');
  return [document.createTextNode(`${name} `), meta];
}

export function percent(value: number | null): string {
  return value === null ? '—' : `${fixed(value * 100, 0)}%`;
}

export function interval(value: number | null, low: number | null, high: number | null, fmt: (v: number) => string): string {
  if (value === null) {
    return '—';
  }
  return fmt(value) + (low !== null && high !== null ? ` (${fmt(low)}–${fmt(high)})` : '');
}

function points(value: number | null): string {
  if (value === null) {
    return '—';
  }
  const rounded = fixed(value * 100, 0);
  return rounded.startsWith('-') ? rounded : `+${rounded}`;
}

/** evaluation_stats.p_value: "< 0.001" or three decimals. */
export function pValue(p: number | null): string {
  return p === null ? '—' : p < 0.001 ? '< 0.001' : fixed(p, 3);
}

function versus(s: Json): string {
  const low = num(s.difference_low);
  const difference = points(num(s.difference));
  return low === null ? difference : `${difference} (${points(low)} to ${points(num(s.difference_high))})`;
}

/** The statistics table's cells (evaluation_stats.stats_cells). */
export function statsCells(doc: Json): string[][] {
  return list(doc.summary).filter(isObject).filter(s => 'pass_low' in s).map(s => {
    const verdict = str(s.verdict) || '—';
    const total = num(s.total_p50_s);
    return [
      columnTitle(doc, str(s.column) || str(s.provider)), String(num(s.runs) ?? ''),
      interval(num(s.pass_rate), num(s.pass_low), num(s.pass_high), percent),
      interval(num(s.score), num(s.score_low), num(s.score_high), v => fixed(v, 2)),
      total === null ? '—' : fixed(total, 2), usd(num(s.cost_p50)),
      verdict === 'baseline' ? '' : versus(s), verdict === 'baseline' ? '' : pValue(num(s.p_value)), verdict
    ];
  });
}

function agreementCells(doc: Json): string[][] {
  return list(doc.agreement).filter(isObject).map(a => {
    const share = num(a.percent);
    const kappa = num(a.kappa);
    const agreement = percent(share === null ? null : share / 100);
    return [str(a.check), String(num(a.n) ?? 0), agreement, kappa === null ? '—' : fixed(kappa, 2)];
  });
}

/** Each verdict in words, then what changed since the cell's last run (evaluation_stats.verdicts). */
export function verdictLines(doc: Json): string[] {
  const lines = list(doc.comparisons).filter(isObject)
    .map(c => `${columnTitle(doc, str(c.column))} vs ${columnTitle(doc, str(c.baseline))}: ${str(c.sentence)}`);
  if (isObject(doc.changes)) {
    lines.push(str(doc.changes.sentence));
  }
  return lines;
}

function table(head: string[], rows: string[][], className: string): HTMLElement {
  const holder = el('div', className);
  const node = el('table');
  const tr = el('tr');
  head.forEach(title => tr.append(el('th', '', title)));
  const thead = el('thead');
  thead.append(tr);
  const tbody = el('tbody');
  for (const row of rows) {
    const line = el('tr');
    row.forEach(cell => line.append(el('td', '', cell)));
    tbody.append(line);
  }
  node.append(thead, tbody);
  holder.append(node);
  return holder;
}

/** The statistics table, shown under "details" (null for a document saved before the statistics). */
export function statsTable(doc: Json): HTMLElement | null {
  const rows = statsCells(doc);
  return rows.length ? table(STATS, rows, 'ipyagent-eval-summary ipyagent-eval-stats') : null;
}

/** The verdicts in words and the judges' agreement with the grades (evaluation_stats.judgement_html). */
export function judgementNodes(doc: Json): HTMLElement[] {
  if (!statsCells(doc).length) {
    return [];
  }
  const nodes = verdictLines(doc).map(line => el('div', 'ipyagent-eval-verdict', line));
  const agreement = agreementCells(doc);
  if (agreement.length) {
    nodes.push(table(AGREEMENT, agreement, 'ipyagent-eval-summary ipyagent-eval-agreement'));
  }
  return nodes;
}

/** A graded cell's mark, apart from its automatic one (evaluation_stats.grade_mark_html). */
export function gradeMark(r: Json): HTMLElement | null {
  if (typeof r.human !== 'boolean') {
    return null;
  }
  const kind = r.human ? 'pass' : 'fail';
  return el('span', `ipyagent-eval-human ipyagent-eval-human-${kind}`, `human ${r.human ? '✓' : '✗'}`);
}
