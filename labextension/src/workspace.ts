/**
 * JupyterLab / Notebook 7 plugin: the notebook as the agent's workspace (`%%agent --notebook`,
 * `%agent serve-mcp`). The kernel opens a comm on target `WORKSPACE_TARGET`
 * (src/ipyagent/notebook/workspace.py); this plugin registers it on each notebook's kernel and
 * answers for that notebook: first `{hello: {kind}}`, then one answer per request,
 * `{request, cells}` / `{request, cell}` or `{request, error}`.
 *
 * Operations (`op`): `cells` (every cell), `insert` `{index, source, cell_type}`, `edit`
 * `{index, source}`, `set_outputs` `{index, outputs, execution_count}` (the outputs of a cell the
 * kernel ran itself: the `%%agent` cell holds the kernel, so a run asked of the front end would
 * wait behind it). The kernel asked the user first (the approval card with the change's diff);
 * sources are set as text, and outputs go through the notebook's own output model and renderers.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

import { answer, type Request } from './workspace_ops';

/** The kernel's comm target for the notebook operations (workspace.py). */
export const WORKSPACE_TARGET = 'ipyagent.notebook';

/** Answer the kernel's notebook comm `comm` for `panel`'s notebook. */
export function serve(panel: NotebookPanel, comm: Kernel.IComm, kind: string): void {
  comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
    const request = (msg.content.data || {}) as Request;
    const model = panel.content.model;
    let data: { [key: string]: unknown };
    try {
      if (!model) {
        throw new Error('the notebook is not open');
      }
      data = answer(model, request);
    } catch (error) {
      data = { error: error instanceof Error ? error.message : String(error) };
    }
    comm.send({ request: String(request.request), ...data } as unknown as JSONObject);
  };
  comm.send({ hello: { kind } });
}

/** Register the target on `panel`'s kernel, now and whenever it changes. */
async function watch(panel: NotebookPanel, kind: string): Promise<void> {
  await panel.sessionContext.ready;
  const register = (): void => {
    const kernel = panel.sessionContext.session?.kernel;
    if (kernel && !kernel.isDisposed) {
      kernel.registerCommTarget(WORKSPACE_TARGET, comm => serve(panel, comm, kind));
    }
  };
  register();
  panel.sessionContext.kernelChanged.connect(register);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:notebook-workspace',
  description: "lets %%agent --notebook and %agent serve-mcp read, insert and edit cells and set a run's outputs",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const kind = app.name || 'JupyterLab';
    tracker.forEach(panel => void watch(panel, kind));
    tracker.widgetAdded.connect((_, panel) => void watch(panel, kind));
  }
};

export default plugin;
