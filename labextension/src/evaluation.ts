/**
 * Evaluation document (`%%compare --over`, Evaluation.to_json()) -> DOM, mirroring the
 * HTML fallback (notebook/render/evaluation.py): a headline, the summary per provider,
 * and the matrix rows x providers in pages of PAGE rows, each cell coloured by its outcome
 * with the answer's first line; opening a cell shows the prompt, the whole answer, each
 * assertion and why, and the figures. Every string is set as text, never as HTML.
 */

import { CellContext, decorateRun, keepOpen, matrixState } from './evaluation_cell';
import { columnLabel, gradeMark, idNodes, interval, judgementNodes, percent, statsTable, titleNodes } from './evaluation_stats';
import { Filter, filterBar, filteredRows } from './matrix_filters';
import { fixed, usd } from './numbers';
import { EVALUATION_FIRST_LINE, EVALUATION_PAGE_ROWS, EVALUATION_PREVIEW, EVALUATION_SUMMARY_COLUMNS,
  EVALUATION_SUMMARY_DETAILS } from './policy';
import { Json, el, isObject, list, num, str } from './transcript';

/** Rows per page of the matrix (policy.json, as render/evaluation.py's PAGE). */
export const PAGE = EVALUATION_PAGE_ROWS;
const FIRST_LINE = EVALUATION_FIRST_LINE;
const MARK: { [kind: string]: string } = {
  pass: '✓', fail: '✗', error: '!', skipped: '–', none: '·', flaky: '≈', template: '?'
};

/** (key of a summary row, column title) of the summary shown, and of every figure (policy.json). */
const SUMMARY = EVALUATION_SUMMARY_COLUMNS;
const DETAILS = EVALUATION_SUMMARY_DETAILS;

/** One figure of a summary row (evaluation.py `_figure`): pass_interval with its 95% interval, tokens in / out. */
function figure(key: string, row: Json): string {
  if (key === 'pass_interval') {
    return interval(num(row.pass_rate), num(row.pass_low), num(row.pass_high), percent);
  }
  if (key === 'tokens') {
    return `${num(row.input_tokens) ?? 0} / ${num(row.output_tokens) ?? 0}`;
  }
  const value = row[key];
  const n = num(value);
  if (typeof value === 'string') {
    return value;
  }
  if (n === null) {
    return '—';
  }
  if (key === 'pass_rate') {
    return `${fixed(n * 100, 0)}%`;
  }
  if (key.endsWith('_s')) {
    return fixed(n, 2);
  }
  if (key === 'cost' || key === 'judge_cost') {
    return usd(n);
  }
  return String(n);
}

/** The summary's columns (evaluation.py `summary_columns`): cost only when some column's is known; `full`: every figure. */
function summaryColumns(summary: Json[], full: boolean): [string, string][] {
  if (full) {
    return DETAILS;
  }
  const costs = summary.some(row => num(row.cost) !== null);
  return SUMMARY.filter(([key]) => key !== 'cost' || costs);
}

/** The summary table (evaluation.py `summary_html`), each column named by its alias, the id dim. */
function summaryTable(doc: Json, full: boolean): HTMLElement {
  const summary = list(doc.summary).filter(isObject);
  const columns = summaryColumns(summary, full);
  const rows = summary.map(row => {
    const tr = el('tr');
    for (const [key] of columns) {
      const td = el('td', '', key === 'column' ? '' : figure(key, row));
      if (key === 'column') {
        // A document saved before columns names the provider.
        td.append(...titleNodes(doc, str(row.column ?? row.provider)));
      }
      tr.append(td);
    }
    return tr;
  });
  const holder = el('div', full ? 'ipyagent-eval-summary ipyagent-eval-full' : 'ipyagent-eval-summary');
  holder.append(table(columns.map(([, title]) => title), rows));
  return holder;
}

/** What the summary leaves out, closed: every figure of each column, and the statistics (evaluation.py `details_html`). */
function detailsNode(doc: Json): HTMLElement {
  const details = el('details', 'ipyagent-eval-details');
  const scroll = el('div', 'ipyagent-eval-scroll');
  const stats = statsTable(doc);
  scroll.append(summaryTable(doc, true), ...(stats ? [stats] : []));
  details.append(el('summary', '', 'details'), scroll);
  return details;
}

/** A matrix column's header: its alias and pass rate, the full id under it dim (evaluation.py `_label_html`). */
function headerNode(doc: Json, column: string, rate = ''): HTMLElement {
  const th = el('th');
  const [name, full] = columnLabel(doc, column);
  th.append(...idNodes(name));
  if (rate) {
    th.append(' ', el('span', 'ipyagent-eval-rate', rate));
  }
  if (full) {
    const meta = el('span', 'ipyagent-meta');
    meta.append(...idNodes(full));
    th.append(el('br'), meta);
  }
  return th;
}

/** pass | fail (an assertion failed) | error (the run failed) | skipped | template (not rendered) | none (no assertions). */
export function outcomeClass(r: Json): string {
  if (r.status === 'skipped') {
    return 'skipped';
  }
  if (r.status === 'template_error') {
    return 'template';
  }
  if (r.status !== 'ok') {
    return 'error';
  }
  if (!list(r.outcomes).length) {
    return 'none';
  }
  return r.passed ? 'pass' : 'fail';
}

function firstLine(r: Json): string {
  const text = r.status === 'ok' ? str(r.text) : str(r.error);
  const line = text.split('\n').map(l => l.trim()).find(l => l) ?? '';
  return line.length <= FIRST_LINE ? line : line.slice(0, FIRST_LINE - 1) + '…';
}

/**
 * A row's fields in the order the rows gave them (`field_order`; a document without it: as
 * stored). A saved notebook's JSON has its keys sorted, so `capital` would come before `country`.
 */
function inOrder(fields: unknown, order: string[]): unknown {
  if (!isObject(fields)) {
    return fields;
  }
  const keys = [...order.filter(k => k in fields), ...Object.keys(fields).filter(k => !order.includes(k))];
  return Object.fromEntries(keys.map(k => [k, fields[k]]));
}

/** The row's fields the assertions read: its expected values (evaluation.py `expected_fields`). */
function expectedFields(doc: Json): Set<string> {
  const names = new Set<string>();
  for (const spec of list(doc.assertions).map(String)) {
    const field = /\brow(?:\.(\w+)|\[\s*['"]([^'"]+)['"]\s*\])/g;
    for (let m = field.exec(spec); m; m = field.exec(spec)) {
      names.add(m[1] ?? m[2]);
    }
  }
  return names;
}

/** [the inputs, the expected values] of a row's fields, in the row's order (evaluation.py `split_fields`). */
function splitFields(fields: unknown, expected: Set<string>): [Json, Json] {
  const f = isObject(fields) ? fields : {};
  const pick = (want: boolean): Json => Object.fromEntries(Object.entries(f).filter(([k]) => expected.has(k) === want));
  return [pick(false), pick(true)];
}

/** Each column's pass rate as its matrix header shows it: "80%" (evaluation.py `pass_rates`). */
function passRates(doc: Json): Map<string, string> {
  const rates = new Map<string, string>();
  for (const s of list(doc.summary).filter(isObject)) {
    const rate = num(s.pass_rate);
    if (rate !== null) {
      rates.set(str(s.column) || str(s.provider), `${fixed(rate * 100, 0)}%`);
    }
  }
  return rates;
}

function rowLabel(fields: unknown): string {
  const f = isObject(fields) ? fields : {};
  const keys = Object.keys(f);
  const text = keys.length === 1 && keys[0] === 'value' ? String(f.value) : keys.map(k => `${k}=${String(f[k])}`).join(', ');
  return text.length <= 60 ? text : text.slice(0, 59) + '…';
}

function cellFigures(r: Json): string {
  const parts: string[] = [];
  const total = num(r.total_s);
  const ttft = num(r.ttft_s);
  if (total !== null) {
    parts.push(`${fixed(total, 2)} s`);
  }
  if (ttft !== null) {
    parts.push(`first token ${fixed(ttft, 2)} s`);
  }
  if (num(r.input_tokens) || num(r.output_tokens)) {
    parts.push(`${num(r.input_tokens) ?? 0} in / ${num(r.output_tokens) ?? 0} out tokens`);
  }
  if (num(r.cost) !== null) {
    parts.push(usd(num(r.cost)));
  }
  if (num(r.judge_cost) !== null) {
    parts.push(`judge ${usd(num(r.judge_cost))}`);
  }
  if (r.cached) {
    parts.push('cached');
  }
  if (str(r.run_id)) {
    parts.push(`run ${str(r.run_id)}`);
  }
  return parts.join(' · ');
}

function labelled(label: string, text: string): HTMLElement {
  const block = el('div');
  block.append(el('b', '', label), el('pre', '', text));
  return block;
}

/** evaluation_render.repeats_class: pass (all passed), fail/error (none did), flaky (they disagree). */
export function repeatsClass(runs: Json[]): string {
  const kinds = new Set(runs.map(outcomeClass));
  if (kinds.size === 1) {
    return [...kinds][0];
  }
  const verdicts = new Set(runs.filter(r => r.status === 'ok' || r.status === 'failed').map(r => Boolean(r.passed)));
  return verdicts.size > 1 ? 'flaky' : verdicts.has(false) ? 'fail' : 'skipped';
}

function cellNode(runs: Json[] | undefined, repeat: number, column: string, context: CellContext): HTMLElement {
  const td = el('td');
  if (!runs || !runs.length) {
    td.append(el('div', 'ipyagent-eval-cell ipyagent-eval-skipped', 'not run'));
    return td;
  }
  const details = el('details') as HTMLDetailsElement;
  let kind: string;
  // One run, or a row never sent (its repeats alike): the run's line; else k/N passed and each repeat.
  if ((repeat <= 1 && runs.length === 1) || runs.every(r => r.status === 'template_error')) {
    kind = outcomeClass(runs[0]);
    const summary = el('summary', '', `${MARK[kind]} ${firstLine(runs[0])}`);
    details.append(summary);
    runDetail(details, runs[0]);
    decorateRun(details, summary, runs[0], column, context);
  } else {
    kind = repeatsClass(runs);
    const passed = runs.filter(r => r.passed).length;
    const summary = el('summary', '', `${MARK[kind]} ${passed}/${repeat} passed · ${firstLine(runs[0])}`);
    details.append(summary);
    for (const r of runs) {
      const title = el('div', 'ipyagent-eval-title', `repeat ${(num(r.repeat) ?? 0) + 1}: ${MARK[outcomeClass(r)]}`);
      details.append(title);
      runDetail(details, r);
      decorateRun(details, title, r, column, context);
      const mark = gradeMark(r);
      if (mark) {
        summary.append(' ', mark);
      }
    }
  }
  keepOpen(details, `${num(runs[0].row)}\u0000${column}`, context.state);
  const box = el('div', `ipyagent-eval-cell ipyagent-eval-${kind}`);
  box.append(details);
  td.append(box);
  // The whole cell is a click target, its padding too (the summary line is one already).
  td.addEventListener('click', event => {
    if (event.target === td || event.target === box) {
      details.open = !details.open;
    }
  });
  return td;
}

/** One run's detail: prompt, answer, structured output, tool calls, error, each check and why, figures. */
function runDetail(details: HTMLElement, r: Json): void {
  details.append(labelled('prompt', str(r.prompt)));
  if (str(r.text)) {
    details.append(labelled('answer', str(r.text)));
    const chars = num(r.text_chars);
    if (chars !== null) {
      // A saved answer is its first characters (evaluation.py `preview_line`).
      const line = `the first ${EVALUATION_PREVIEW} of ${chars.toLocaleString('en-US')} characters`;
      details.append(el('div', 'ipyagent-meta', line));
    }
  }
  if (r.output !== null && r.output !== undefined) {
    details.append(labelled('structured output', JSON.stringify(r.output, null, 1)));
  }
  for (const call of list(r.tool_calls)) {
    if (isObject(call)) {
      details.append(el('div', 'ipyagent-meta', `tool ${str(call.name)}(${JSON.stringify(call.input)}) → ${String(call.output)}`));
    }
  }
  if (r.status !== 'ok') {
    const error = el('div');
    error.append(el('b', '', str(r.error_type)), `: ${str(r.error)}`);
    details.append(error);
  }
  const outcomes = list(r.outcomes).filter(isObject);
  if (outcomes.length) {
    const ul = el('ul');
    for (const o of outcomes) {
      const score = num(o.score);
      ul.append(el('li', '', `${o.passed ? '✓' : '✗'} ${str(o.name)}${score !== null ? ` (${score})` : ''}${str(o.reason) ? ` — ${str(o.reason)}` : ''}`));
    }
    details.append(ul);
  }
  const figures = cellFigures(r);
  if (figures) {
    details.append(el('div', 'ipyagent-meta', figures));
  }
}

function table(head: (string | HTMLElement)[], rows: HTMLElement[]): HTMLElement {
  const node = el('table');
  const thead = el('thead');
  const tr = el('tr');
  head.forEach(title => tr.append(typeof title === 'string' ? el('th', '', title) : title));
  thead.append(tr);
  const tbody = el('tbody');
  tbody.append(...rows);
  node.append(thead, tbody);
  return node;
}

/** The matrix's columns (a document saved before variants: its providers). */
function columnsOf(doc: Json): string[] {
  return list(doc.columns).length ? list(doc.columns).map(str) : list(doc.providers).map(str);
}

/** evaluation.py reload_line: the evaluation's id, by which the run store gives it back. */
export function reloadLine(doc: Json): string {
  return `evaluation ${str(doc.id)} · ipyagent.load_evaluation("${str(doc.id)}") reads it back`;
}

/** evaluation_render.wall_time: milliseconds under a second ("43 ms"), else "12.3 s". */
export function wallTime(seconds: number | null): string {
  const value = seconds ?? 0;
  return value < 1 ? `${fixed(value * 1000, 0)} ms` : `${fixed(value, 1)} s`;
}

/** A text check's kind in words, and what it adds after its value (evaluation.py `_CHECK_WORDS`). */
const CHECK_WORDS: { [kind: string]: [string, string] } = {
  contains: ['contains', ''], icontains: ['contains', ', any case'], regex: ['matches', ''], equals: ['equals', '']
};

/** A check in a title: "icontains:{{ row.capital }}" -> "contains the row's capital, any case" (`check_title`). */
export function checkTitle(spec: string): string {
  const colon = spec.indexOf(':');
  const kind = colon < 0 ? '' : spec.slice(0, colon);
  if (!Object.prototype.hasOwnProperty.call(CHECK_WORDS, kind)) {
    return spec;
  }
  const words = CHECK_WORDS[kind];
  const value = spec.slice(colon + 1).replace(/\{\{\s*row(?:\.(\w+)|\[\s*['"]([^'"]+)['"]\s*\])\s*\}\}/g,
    (_m, a?: string, b?: string) => `the row's ${a ?? b}`);
  return `${words[0]} ${value}${words[1]}`;
}

/**
 * What the headline counts over every run (evaluation_saved.py `counts`): a saved document keeps
 * them in `saved`, as its matrix may show only some rows; an older one is counted from its runs.
 */
function counts(doc: Json): { done: number; cached: number; passed: number; results: number } {
  if (isObject(doc.saved)) {
    const saved = doc.saved;
    return { done: num(saved.done) ?? 0, cached: num(saved.cached) ?? 0, passed: num(saved.passed) ?? 0,
      results: num(saved.results) ?? 0 };
  }
  const results = list(doc.results).filter(isObject);
  return {
    done: results.filter(r => r.status === 'ok' || r.status === 'failed').length,
    cached: results.filter(r => r.cached).length, passed: results.filter(r => r.passed).length,
    results: results.length
  };
}

/** The line under a saved matrix: how many rows it shows and where the rest are (evaluation.py `saved_note`). */
function savedNote(doc: Json): HTMLElement[] {
  const line = isObject(doc.saved) ? str(doc.saved.note) : '';
  return line ? [el('div', 'ipyagent-meta ipyagent-eval-saved', line)] : [];
}

/** evaluation_render.headline: rows x providers, runs done (and cached), passed, assertions, wall time, early stops. */
export function headline(doc: Json): string {
  const providers = list(doc.providers).map(str);
  const columns = columnsOf(doc);
  const repeat = num(doc.repeat) ?? 1;
  const total = num(doc.total) ?? 0;
  const { done, cached, passed, results } = counts(doc);
  const rows = Math.floor(total / Math.max(columns.length * repeat, 1));
  const head = list(doc.variants).length
    ? `${columns.length} columns (${providers.length} providers × ${Math.floor(columns.length / Math.max(providers.length, 1))} variants)`
    : `${providers.length} providers`;
  let text = `${head} × ${rows} rows${repeat > 1 ? ` × ${repeat} repeats` : ''}: ${done} of ${total} runs`;
  text += (cached ? ` (${cached} from the cache)` : '') + `, ${passed} passed`;
  const assertions = list(doc.assertions).map(str);
  if (assertions.length) {
    text += ` (${assertions.map(checkTitle).join('; ')})`;
  }
  text += `, ${wallTime(num(doc.wall_s))}`;
  if (doc.interrupted) {
    text += `; interrupted: ${total - results} runs not finished`;
  }
  if (num(doc.budget) !== null) {
    const [budget, spent, reserved] = [num(doc.budget), num(doc.spent) ?? 0, num(doc.reserved) ?? 0].map(usd);
    text += `; budget ${budget}: spent ${spent}, reserved ${reserved}, `;
    text += `${num(doc.skipped) ?? 0} runs skipped`;
  }
  if (list(doc.flaky).length) {
    text += `; ${list(doc.flaky).length} flaky (repeats disagree)`;
  }
  return text;
}

/** The matrix of `rows` (row numbers) in pages of PAGE rows, each page's rows built when it is first opened. */
function matrixPages(doc: Json, rows: number[], columns: string[], fields: Map<number, unknown>,
  cells: (row: number, column: string) => Json[] | undefined, repeat: number, context: CellContext): HTMLElement[] {
  const expected = expectedFields(doc);
  const rates = passRates(doc);
  const head = (): (string | HTMLElement)[] =>
    ['#', 'input', ...(expected.size ? ['expected'] : []), ...columns.map(c => headerNode(doc, c, rates.get(c)))];
  const pages = Math.ceil(rows.length / PAGE);
  const out: HTMLElement[] = [];
  for (let start = 0; start < rows.length; start += PAGE) {
    const chunk = rows.slice(start, start + PAGE);
    // A page's rows are built when it is first opened: a long matrix opens at once.
    const build = (): HTMLElement => table(head(), chunk.map(n => {
      const tr = el('tr');
      tr.append(el('td', '', String(n)));
      const [inputs, wanted] = splitFields(fields.get(n), expected);
      tr.append(el('td', '', rowLabel(inputs)), ...(expected.size ? [el('td', '', rowLabel(wanted))] : []));
      columns.forEach(c => tr.append(cellNode(cells(n, c), repeat, c, context)));
      return tr;
    }));
    if (rows.length <= PAGE) {
      out.push(build());
      continue;
    }
    const page = el('details', 'ipyagent-eval-page') as HTMLDetailsElement;
    page.append(el('summary', '', `rows ${chunk[0]}–${chunk[chunk.length - 1]} (page ${start / PAGE + 1} of ${pages})`));
    const fill = (): void => {
      if (page.childElementCount === 1) {
        page.append(build());
      }
    };
    if (start === 0) {
      page.open = true;
      fill();
    } else {
      page.addEventListener('toggle', fill);
    }
    out.push(page);
  }
  return out;
}

/** What the live matrix gives `renderEvaluation` (evaluation_live.ts): the page's rows in order and
 * the fields of each (a row may have no run yet), its filter bar and the pager over the page. */
export interface LivePage {
  rows: number[];
  fields: Map<number, unknown>;
  bar: HTMLElement;
  pager: HTMLElement;
}

/** The nodes of a saved evaluation; `live`: a page of a live one (the kernel filtered and paged it). */
export function renderEvaluation(data: unknown, live?: LivePage): HTMLElement[] {
  if (!isObject(data) || !Array.isArray(data.results) || !Array.isArray(data.providers)) {
    return [el('div', 'ipyagent-error', '⚠ this output is not an ipyagent evaluation')];
  }
  const root = el('div', 'ipyagent-evaluation');
  root.append(el('div', 'ipyagent-eval-title', headline(data)));
  root.append(summaryTable(data, false), detailsNode(data), ...judgementNodes(data));

  const columns = columnsOf(data);
  const repeat = num(data.repeat) ?? 1;
  const byCell = new Map<string, Json[]>();
  const fields = new Map<number, unknown>(live?.fields ?? []);
  const order = list(data.field_order).map(String);
  for (const r of list(data.results).filter(isObject)) {
    const key = `${num(r.row)}\u0000${str(r.column ?? r.provider)}`;
    byCell.set(key, [...(byCell.get(key) ?? []), r]);
    fields.set(num(r.row) ?? 0, inOrder(r.fields, order));
  }
  byCell.forEach(runs => runs.sort((a, b) => (num(a.repeat) ?? 0) - (num(b.repeat) ?? 0)));
  const rows = live?.rows ?? [...fields.keys()].sort((a, b) => a - b);
  const state = matrixState(str(data.id));
  const cells = (row: number, c: string): Json[] | undefined => byCell.get(`${row}\u0000${c}`);
  const run = (row: number, c: string, k: number): Json | undefined => cells(row, c)?.find(r => (num(r.repeat) ?? 0) === k);
  const context: CellContext = { evaluation: str(data.id), columns, run, state };
  const matrix = el('div', 'ipyagent-eval-matrix');
  const draw = (filter: Filter): void => {
    state.filter = filter;
    const shown = live ? rows : filteredRows(data, rows, filter);
    matrix.replaceChildren(...(shown.length ? matrixPages(data, shown, columns, fields, cells, repeat, context)
      : [el('div', 'ipyagent-meta', 'no row to show under this filter')]));
  };
  const bar = live?.bar ?? filterBar(data, rows, state.filter, draw);
  root.append(bar, ...(live ? [live.pager] : savedNote(data)), matrix);
  draw(state.filter);
  for (const note of list(data.notes)) {
    root.append(el('div', 'ipyagent-meta', str(note)));
  }
  if (!live) {
    root.append(el('div', 'ipyagent-meta', reloadLine(data)));
  }
  return [root];
}
