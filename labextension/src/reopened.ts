/**
 * JupyterLab / Notebook 7 plugin: a page reopened mid-run keeps the run's saved output.
 *
 * The kernel replaces a finished run's live widget with its saved output through
 * `update_display_data`, addressed by a display id. Display ids are not saved in a notebook,
 * so a page reopened while the run streams never gets that update: it would keep a widget
 * output whose model is closed (an empty output, saved as a dangling widget reference, and no
 * transcript). On the widget's `end` message its model dispatches `SAVED_OUTPUT_EVENT` with
 * the saved output and its own model id (saved_output.ts); this plugin sets every notebook
 * output that shows that widget to the saved output, as the update would have. It works on
 * the notebooks' models, so a cell scrolled out of a windowed notebook or a view not drawn
 * yet is found too.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { ICodeCellModel } from '@jupyterlab/cells';

import { SAVED_OUTPUT_EVENT } from './saved_output';

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';

/** Set every output showing widget `modelId` to `output`; the number replaced. */
export function replaceWidgetOutputs(tracker: INotebookTracker, modelId: string, output: any): number {
  let replaced = 0;
  tracker.forEach(panel => {
    const cells = panel.content.model?.cells;
    for (let c = 0; cells && c < cells.length; c++) {
      const cell = cells.get(c);
      if (cell.type !== 'code') {
        continue;
      }
      const outputs = (cell as ICodeCellModel).outputs;
      for (let i = 0; i < outputs.length; i++) {
        const view = outputs.get(i).data[WIDGET_VIEW] as { model_id?: unknown } | undefined;
        if (view && view.model_id === modelId) {
          outputs.set(i, output);
          replaced++;
        }
      }
    }
  });
  return replaced;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:reopened-output',
  description: "A page reopened mid-run puts a finished run's saved output in place of its live widget",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    document.addEventListener(SAVED_OUTPUT_EVENT, event => {
      const detail = (event as CustomEvent).detail;
      if (detail && typeof detail.modelId === 'string' && detail.output && replaceWidgetOutputs(tracker, detail.modelId, detail.output)) {
        event.preventDefault();
      }
    });
  }
};

export default plugin;
