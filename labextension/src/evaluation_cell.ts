/**
 * What a saved matrix's cell adds to its detail beside the run (evaluation.ts): the person's
 * grade (a mark in the summary apart from the automatic one, and the controls, grading.ts), and
 * its answer beside another column's answer to the same row, the differences marked word by word
 * (word_diff.ts). The matrix remembers which cells were open and the filter, by evaluation, so
 * a redraw (a grade came back from the kernel) leaves the page as it was.
 */

import { gradeMark } from './evaluation_stats';
import { gradeBox } from './grading';
import { Filter } from './matrix_filters';
import { Json, el, num, str } from './transcript';
import { diffView } from './word_diff_view';

/** What a matrix's page remembers across redraws of the same evaluation. */
export interface MatrixState {
  filter: Filter;
  open: Set<string>;
}

const STATES = new Map<string, MatrixState>();

/** The state of evaluation `id`'s matrix (made on first use; the last 50 kept). */
export function matrixState(id: string): MatrixState {
  let state = STATES.get(id);
  if (!state) {
    state = { filter: 'all', open: new Set() };
    STATES.set(id, state);
    if (STATES.size > 50) {
      STATES.delete(STATES.keys().next().value as string);
    }
  }
  return state;
}

/** What a cell needs of the whole matrix. */
export interface CellContext {
  evaluation: string;
  columns: string[];
  /** The run of a row on a column, its `repeat`-th, if any. */
  run: (row: number, column: string, repeat: number) => Json | undefined;
  state: MatrixState;
}

function ran(r: Json): boolean {
  return r.status === 'ok' || r.status === 'failed';
}

/** "compare with [column]": this answer and that column's, side by side. */
function diffControl(r: Json, column: string, context: CellContext): HTMLElement | null {
  const row = num(r.row) ?? 0;
  const repeat = num(r.repeat) ?? 0;
  const others = context.columns.filter(c => c !== column && str(context.run(row, c, repeat)?.text));
  if (!str(r.text) || !others.length) {
    return null;
  }
  const holder = el('div', 'ipyagent-eval-diff');
  const select = el('select', 'ipyagent-eval-diff-select') as HTMLSelectElement;
  select.append(el('option', '', '—'), ...others.map(c => el('option', '', c)));
  select.title = "show this answer beside another column's, the words that differ marked";
  const shown = el('div');
  select.addEventListener('change', () => {
    const other = select.selectedIndex > 0 ? others[select.selectedIndex - 1] : null;
    const theirs = other === null ? undefined : context.run(row, other, repeat);
    const view = other === null || !theirs ? [] : [diffView(str(r.text), str(theirs.text), column, other)];
    shown.replaceChildren(...view);
  });
  const label = el('label', 'ipyagent-meta', 'compare with ');
  label.append(select);
  holder.append(label, shown);
  return holder;
}

/** Add run `r`'s grade mark to `title` (a cell's summary, or its repeat's title), its grade controls
 * and its diff to `details`. */
export function decorateRun(details: HTMLElement, title: HTMLElement, r: Json, column: string, context: CellContext): void {
  const mark = gradeMark(r);
  if (mark) {
    title.append(' ', mark);
  }
  if (ran(r)) {
    details.append(gradeBox(context.evaluation, r, column));
  }
  const diff = diffControl(r, column, context);
  if (diff) {
    details.append(diff);
  }
}

/** Keep `details`' open state (cell `key`) in the matrix's, and open it if it was. */
export function keepOpen(details: HTMLDetailsElement, key: string, state: MatrixState): void {
  details.open = state.open.has(key);
  details.addEventListener('toggle', () => {
    if (details.open) {
      state.open.add(key);
    } else {
      state.open.delete(key);
    }
  });
}
