/**
 * The saved output of a finished run, handed from the live view to the page.
 *
 * When a run ends, the kernel updates the cell's display (by its display id) with the saved
 * output, then sends the live widget an `end` message with the same output (live.ts). A page
 * that displayed the run has dropped the widget's view by then. A page reopened mid-run has
 * not: display ids are not saved with a notebook, so the update never reaches it. Its view
 * asks the page to put the saved output in place of its own (`replaceOutput`); in JupyterLab
 * and Notebook 7 the plugin in reopened.ts does so. Elsewhere nobody answers and the view
 * draws the transcript itself.
 *
 * No imports: live.ts is bundled on its own for anywidget and must not pull JupyterLab in.
 */

type Json = { [key: string]: any };

/** The event the page listens for (on `document`); its detail is `{node, output}`. */
export const SAVED_OUTPUT_EVENT = 'ipyagent-saved-output';

/** What an `end` message leaves in a run's document. */
export interface Ended {
  final: Json | null;
  output: Json | null;
}

/** The nbformat output an `end` message carries: `{mime, fallbacks, metadata}` beside the record
 * (`doc`), which it holds under `mime`; null when the message had none. */
export function savedOutput(doc: Ended): Json | null {
  const output = doc.output;
  if (!doc.final || !output || typeof output.mime !== 'string') {
    return null;
  }
  const fallbacks = output.fallbacks && typeof output.fallbacks === 'object' ? output.fallbacks : {};
  return {
    output_type: 'display_data',
    data: { ...fallbacks, [output.mime]: doc.final },
    metadata: output.metadata && typeof output.metadata === 'object' ? output.metadata : {}
  };
}

/** Asks the page to replace the output that shows `node` with `output`: true when it did. */
export function replaceOutput(node: HTMLElement, output: Json): boolean {
  const event = new CustomEvent(SAVED_OUTPUT_EVENT, { cancelable: true, detail: { node, output } });
  return !document.dispatchEvent(event);
}

/** Once `doc` has ended with a saved output, hand it to the page for `node`'s output (see
 * above). Call it on each change of `doc`; true once the output was replaced. */
export function offerSavedOutput(node: HTMLElement, doc: Ended): boolean {
  const output = savedOutput(doc);
  return output !== null && replaceOutput(node, output);
}
