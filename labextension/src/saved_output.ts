/**
 * The saved output of a finished run, handed from the live widget to the page.
 *
 * When a run ends, the kernel updates the cell's display (by its display id) with the saved
 * output, then sends the live widget an `end` message with the same output and the widget's
 * model id (live.ts). Display ids are not saved with a notebook, so in a page reopened mid-run
 * the update reaches nothing: that page's output still shows the widget. The widget model asks
 * the page to put the saved output in place of every output that shows it (`replaceOutputs`);
 * in JupyterLab and Notebook 7 the plugin in reopened.ts does so. A page the update reached
 * has no such output left, and a front end without the plugin lets the view draw the
 * transcript itself.
 *
 * No JupyterLab import but types: live.ts is bundled on its own for anywidget and must not pull
 * JupyterLab in.
 */

import type { SavedOutput, SavedOutputParts } from './wire';

/** The event the page listens for (on `document`); its detail is `{modelId, output}`. */
export const SAVED_OUTPUT_EVENT = 'ipyagent-saved-output';

/** What an `end` message leaves in a run's (or a comparison's) document. */
export interface Ended {
  final: object | null;
  output: SavedOutputParts | null;
}

/** The nbformat output an `end` message carries — `{mime, fallbacks, metadata, model_id}` beside
 * the record (`doc`), held under `mime` — and the widget it replaces; null without one. */
export function savedOutput(doc: Ended): { modelId: string; output: SavedOutput } | null {
  const output = doc.output;
  if (!doc.final || !output || typeof output.mime !== 'string' || typeof output.model_id !== 'string') {
    return null;
  }
  const fallbacks = output.fallbacks && typeof output.fallbacks === 'object' ? output.fallbacks : {};
  const metadata = output.metadata && typeof output.metadata === 'object' ? output.metadata : {};
  // The kernel's bundle (the record under its MIME type, the fallbacks) and metadata: JSON, as nbformat has them.
  const data = { ...fallbacks, [output.mime]: doc.final } as SavedOutput['data'];
  const saved: SavedOutput = { output_type: 'display_data', data, metadata: metadata as SavedOutput['metadata'] };
  return { modelId: output.model_id, output: saved };
}

/** Once `doc` has ended with a saved output, ask the page to put it in place of every output
 * showing the widget; true when one was replaced. */
export function offerSavedOutput(doc: Ended): boolean {
  const saved = savedOutput(doc);
  if (saved === null) {
    return false;
  }
  return !document.dispatchEvent(new CustomEvent(SAVED_OUTPUT_EVENT, { cancelable: true, detail: saved }));
}
