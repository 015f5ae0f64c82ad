/**
 * JupyterLab / Notebook 7 plugin: a page reopened mid-run, or after the run ended, shows the
 * run's saved output in place of its live widget.
 *
 * The kernel replaces a finished run's live widget with its saved output through
 * `update_display_data`, addressed by a display id. Display ids are not saved in a notebook,
 * so a page reopened while the run streams never gets that update, and a page reopened after
 * the run ended finds the widget closed (ipywidgets: "model not found"). Such an output is
 * marked `{"ipyagent": {"live": true}}` in its metadata. Two ways bring the saved output:
 *
 * - on the widget's `end` message its model dispatches `SAVED_OUTPUT_EVENT` with the saved
 *   output and its own model id (saved_output.ts);
 * - when a notebook is opened (or its kernel changes) with marked outputs, the plugin asks the
 *   kernel on comm target `SAVED_OUTPUT_TARGET` (src/ipyagent/notebook/saved_outputs.py) for
 *   the saved output of each: the kernel answers with those that ended and sends the others
 *   when they end.
 *
 * Either way every notebook output that shows that widget is set to the saved output, as the
 * update would have. It works on the notebooks' models, so a cell scrolled out of a windowed
 * notebook or a view not drawn yet is found too.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import type { IDisplayData } from '@jupyterlab/nbformat';

import { SAVED_OUTPUT_EVENT } from './saved_output';

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';

/** The kernel's comm target for saved outputs (saved_outputs.py). */
export const SAVED_OUTPUT_TARGET = 'ipyagent.saved_output';

/** Every code cell output of `model`, with the cell's outputs and its index there. */
function* outputsOf(model: INotebookModel | null | undefined) {
  const cells = model?.cells;
  for (let c = 0; cells && c < cells.length; c++) {
    const cell = cells.get(c);
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    for (let i = 0; i < outputs.length; i++) {
      yield { outputs, index: i, output: outputs.get(i) };
    }
  }
}

/** The model ids of the live widgets (outputs marked `ipyagent.live`) `model` shows. */
export function liveWidgetIds(model: INotebookModel | null | undefined): string[] {
  const ids = new Set<string>();
  for (const { output } of outputsOf(model)) {
    const view = output.data[WIDGET_VIEW] as { model_id?: unknown } | undefined;
    const mark = output.metadata?.ipyagent as { live?: unknown } | undefined;
    if (view && typeof view.model_id === 'string' && mark && mark.live === true) {
      ids.add(view.model_id);
    }
  }
  return [...ids];
}

/** Set every output showing widget `modelId` to `output`; the number replaced. */
export function replaceWidgetOutputs(tracker: INotebookTracker, modelId: string, output: IDisplayData): number {
  let replaced = 0;
  tracker.forEach(panel => {
    for (const { outputs, index, output: shown } of outputsOf(panel.content.model)) {
      const view = shown.data[WIDGET_VIEW] as { model_id?: unknown } | undefined;
      if (view && view.model_id === modelId) {
        outputs.set(index, output);
        replaced++;
      }
    }
  });
  return replaced;
}

/** Ask `panel`'s kernel for the saved outputs of the live widgets its notebook shows, and put
 * each in place as it comes (now for a run that ended, later for one still running). */
export function askSavedOutputs(tracker: INotebookTracker, panel: NotebookPanel): void {
  const kernel = panel.sessionContext.session?.kernel;
  const ids = liveWidgetIds(panel.content.model);
  if (!kernel || kernel.isDisposed || ids.length === 0) {
    return;
  }
  const comm = kernel.createComm(SAVED_OUTPUT_TARGET);
  comm.onMsg = msg => {
    // The kernel's answer (saved_outputs.py): saved outputs by widget model id, and the ids still running.
    const data = msg.content.data as { outputs?: { [id: string]: IDisplayData }; pending?: unknown[] };
    for (const [modelId, output] of Object.entries(data.outputs || {})) {
      replaceWidgetOutputs(tracker, modelId, output);
    }
    if (!data.pending || data.pending.length === 0) {
      comm.close();
    }
  };
  comm.open({ model_ids: ids });
}

/** Ask once the notebook and its session are ready, and again whenever its kernel changes. */
async function watch(tracker: INotebookTracker, panel: NotebookPanel): Promise<void> {
  await panel.context.ready;
  await panel.sessionContext.ready;
  if (panel.isDisposed) {
    return;
  }
  askSavedOutputs(tracker, panel);
  panel.sessionContext.kernelChanged.connect(() => askSavedOutputs(tracker, panel));
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:reopened-output',
  description: "A page reopened mid-run or after a run ended puts the run's saved output in place of its live widget",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(panel => void watch(tracker, panel));
    tracker.widgetAdded.connect((_, panel) => void watch(tracker, panel));
    document.addEventListener(SAVED_OUTPUT_EVENT, event => {
      const detail = (event as CustomEvent<{ modelId?: unknown; output?: IDisplayData } | null>).detail;
      if (detail && typeof detail.modelId === 'string' && detail.output && replaceWidgetOutputs(tracker, detail.modelId, detail.output)) {
        event.preventDefault();
      }
    });
  }
};

export default plugin;
