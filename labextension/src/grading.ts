/**
 * Grading a run by hand in a saved matrix: pass / fail and a note, in a cell's detail.
 *
 * The renderer cannot reach the kernel, so a grade is a DOM event (`GRADE_EVENT`, bubbling from
 * the cell) that the JupyterLab plugin (grades_plugin.ts) answers: it sends the grade to the
 * kernel that ran the cell (comm target `ipyagent.grade`, src/ipyagent/notebook/grading.py),
 * which keeps it in the run store and answers with the evaluation's new output; the plugin puts
 * that output in place, so the saved notebook holds the grade. Without the plugin or a kernel,
 * the cell says so. Every string is set as text, never as HTML.
 */

import { Json, el, num, str } from './transcript';

/** The event a grade is asked with; its detail is a `GradeEventDetail`. */
export const GRADE_EVENT = 'ipyagent-grade';

/** What the kernel is asked (grading.py's module doc). */
export interface GradeRequest {
  evaluation: string;
  row: number;
  column: string;
  repeat: number;
  passed: boolean | null;
  note: string;
  run_id: string | null;
}

export interface GradeEventDetail {
  request: GradeRequest;
  /** Called once with what to tell the user ('' when the new output is in place). */
  done: (message: string) => void;
}

/** Shown when no one answered the event. */
export const NO_KERNEL = 'grading needs JupyterLab with ipyagent and the kernel that ran this cell';

function button(label: string, title: string, onClick: () => void): HTMLButtonElement {
  const node = el('button', 'ipyagent-eval-grade-button', label) as HTMLButtonElement;
  node.type = 'button';
  node.title = title;
  node.addEventListener('click', onClick);
  return node;
}

/** The grade controls of run `r` of evaluation `evaluation` (pass, fail, clear, a note). */
export function gradeBox(evaluation: string, r: Json, column: string): HTMLElement {
  const box = el('div', 'ipyagent-eval-grade');
  const human = typeof r.human === 'boolean' ? r.human : null;
  const note = el('input', 'ipyagent-eval-grade-note') as HTMLInputElement;
  note.type = 'text';
  note.placeholder = 'note (optional)';
  note.value = str(r.human_note);
  const said = human === null ? 'not graded' : `graded ${human ? 'pass' : 'fail'}`;
  const status = el('span', 'ipyagent-meta ipyagent-eval-grade-status', said);
  const buttons: HTMLButtonElement[] = [];
  const send = (passed: boolean | null): void => {
    const request: GradeRequest = {
      evaluation, row: num(r.row) ?? 0, column, repeat: num(r.repeat) ?? 0, passed, note: note.value,
      run_id: str(r.run_id) || null
    };
    buttons.forEach(b => (b.disabled = true));
    status.textContent = 'saving…';
    let answered = false;
    const done = (message: string): void => {
      if (answered) {
        return;
      }
      answered = true;
      buttons.forEach(b => (b.disabled = false));
      status.textContent = message || 'saved';
    };
    const detail: GradeEventDetail = { request, done };
    if (box.dispatchEvent(new CustomEvent(GRADE_EVENT, { bubbles: true, cancelable: true, detail }))) {
      done(NO_KERNEL); // nobody took it
    }
  };
  buttons.push(button('✓ pass', 'grade this answer as a pass', () => send(true)));
  buttons.push(button('✗ fail', 'grade this answer as a fail', () => send(false)));
  if (human !== null) {
    buttons.push(button('clear', 'take the grade back', () => send(null)));
  }
  const pressed = human === null ? '' : human ? 'pass' : 'fail';
  buttons.forEach(b => b.setAttribute('aria-pressed', String(!!pressed && !!b.textContent?.includes(pressed))));
  box.append(el('b', '', 'your grade '), ...buttons, note, status);
  return box;
}
