/**
 * JupyterLab / Notebook 7 plugin: the grades given in a saved matrix reach the kernel, and the
 * evaluation's new output (with the grade) takes the old one's place in the notebook, so the
 * saved notebook holds it (grading.ts, src/ipyagent/notebook/grading.py).
 *
 * - A `GRADE_EVENT` from a matrix is sent on comm target `GRADE_TARGET` to the kernel of the
 *   notebook the matrix is in; its answer's output replaces every output of that notebook
 *   showing the same evaluation (by its id), and the cell is told what came of it.
 * - A grade given in code (`ev.grade(...)`, `%agent grade`) reaches the page as a display update
 *   sent while another cell runs; each `update_display_data` carrying an evaluation is put in
 *   place the same way (JupyterLab applies such an update only to outputs of the cell that sent it).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { ICodeCellModel } from '@jupyterlab/cells';
import type { IDisplayData, IMimeBundle, OutputMetadata } from '@jupyterlab/nbformat';
import type { NotebookPanel } from '@jupyterlab/notebook';

import { GRADE_EVENT, GradeEventDetail } from './grading';

/** The kernel's comm target for grades (grading.py). */
export const GRADE_TARGET = 'ipyagent.grade';
const EVALUATION = 'application/vnd.ipyagent.evaluation+json';

/** An evaluation's output, as the kernel sends it (nbformat display data). */
type Output = IDisplayData;

/** Put `output` in place of every output of `panel` showing the evaluation it carries; the number replaced. */
export function replaceEvaluation(panel: NotebookPanel, output: Output): number {
  const shownBy = output?.data?.[EVALUATION];
  const id = shownBy && typeof shownBy === 'object' && !Array.isArray(shownBy) ? shownBy.id : undefined;
  const cells = panel.content.model?.cells;
  let replaced = 0;
  for (let c = 0; typeof id === 'string' && cells && c < cells.length; c++) {
    const cell = cells.get(c);
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const shown = outputs.get(i).data[EVALUATION] as { id?: unknown } | undefined;
      if (shown && shown.id === id) {
        outputs.set(i, output);
        replaced++;
      }
    }
  }
  return replaced;
}

function panelOf(tracker: INotebookTracker, target: EventTarget | null): NotebookPanel | null {
  let found: NotebookPanel | null = null;
  tracker.forEach(panel => {
    if (!found && target instanceof Node && panel.node.contains(target)) {
      found = panel;
    }
  });
  return found;
}

/** Send a grade to the kernel of `panel`; tell the cell what came of it. */
export function sendGrade(panel: NotebookPanel, detail: GradeEventDetail): void {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.isDisposed) {
    detail.done('no kernel: start one, run the cell again (its runs come from the cache), then grade');
    return;
  }
  const comm = kernel.createComm(GRADE_TARGET);
  comm.onMsg = msg => {
    const data = msg.content.data as { ok?: boolean; output?: Output | null; message?: string };
    if (data.ok && data.output) {
      replaceEvaluation(panel, data.output);
    }
    detail.done(data.message || (data.ok ? '' : 'not graded'));
    comm.close();
  };
  comm.open({ ...detail.request });
}

/** Watch `panel`'s kernel (and the next ones) for display updates of an evaluation. */
function watchUpdates(panel: NotebookPanel): void {
  const watched = new WeakSet<object>();
  const connect = (): void => {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || watched.has(kernel)) {
      return;
    }
    watched.add(kernel);
    kernel.iopubMessage.connect((_, msg) => {
      const content = msg.content as { data?: IMimeBundle; metadata?: OutputMetadata };
      if (msg.header.msg_type === 'update_display_data' && content.data && EVALUATION in content.data) {
        const output: Output = { output_type: 'display_data', data: content.data, metadata: content.metadata ?? {} };
        replaceEvaluation(panel, output);
      }
    });
  };
  void panel.sessionContext.ready.then(connect);
  panel.sessionContext.kernelChanged.connect(connect);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:grades',
  description: "Grades given in a saved evaluation matrix go to the kernel, and the matrix is redrawn with them",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(watchUpdates);
    tracker.widgetAdded.connect((_, panel) => watchUpdates(panel));
    document.addEventListener(GRADE_EVENT, event => {
      const panel = panelOf(tracker, event.target);
      const detail = (event as CustomEvent).detail as GradeEventDetail | undefined;
      if (panel && detail && detail.request) {
        event.preventDefault();
        sendGrade(panel, detail);
      }
    });
  }
};

export default plugin;
