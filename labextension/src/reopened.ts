/**
 * JupyterLab / Notebook 7 plugin: a page reopened mid-run keeps the run's saved output.
 *
 * The kernel replaces a finished run's live widget with its saved output through
 * `update_display_data`, addressed by a display id. Display ids are not saved in a notebook,
 * so a page reopened while the run streams never gets that update: it would keep a widget
 * output whose model is closed (an empty output, saved as a dangling widget reference, and no
 * transcript). The live view of such a page, on the widget's `end` message, dispatches
 * `SAVED_OUTPUT_EVENT` with the saved output (saved_output.ts); this plugin finds the notebook
 * output that holds the view and sets that output's data to it, as the update would have.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { CodeCell } from '@jupyterlab/cells';

import { SAVED_OUTPUT_EVENT } from './saved_output';

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';

/** Replace the widget output that contains `node` with `output`; true when found. */
export function replaceWidgetOutput(tracker: INotebookTracker, node: Node, output: any): boolean {
  let done = false;
  tracker.forEach(panel => {
    if (done) {
      return;
    }
    // Cells are searched by their own nodes: a cell scrolled out of a windowed notebook is detached.
    for (const cell of panel.content.widgets) {
      if (cell.model.type !== 'code' || !cell.node.contains(node)) {
        continue;
      }
      const area = (cell as CodeCell).outputArea;
      const index = area.widgets.findIndex(child => child.node.contains(node));
      const current = index >= 0 ? area.model.get(index) : undefined;
      if (current && WIDGET_VIEW in current.data) {
        area.model.set(index, output);
        done = true;
      }
      return;
    }
  });
  return done;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:reopened-output',
  description: "A page reopened mid-run puts a finished run's saved output in place of its live widget",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker) => {
    document.addEventListener(SAVED_OUTPUT_EVENT, event => {
      const detail = (event as CustomEvent).detail;
      if (detail && detail.node instanceof Node && detail.output && replaceWidgetOutput(tracker, detail.node, detail.output)) {
        event.preventDefault();
      }
    });
  }
};

export default plugin;
