/**
 * JupyterLab MIME renderer for ipyagent run transcripts.
 *
 * When an ipyagent run ends, its cell output carries
 * `application/vnd.ipyagent.transcript+json` (see
 * src/ipyagent/core/transcript.py and transcript.schema.json). This renderer
 * draws it the way the live widget looked, so a saved or reopened notebook
 * shows every run without a kernel.
 *
 * Model text is untrusted: Markdown is rendered by markdown-it with raw HTML
 * disabled (as the Python side does), then sanitized by DOMPurify on the policy
 * the Python renderer applies too, exactly as the live view does, and made inert
 * (safe_html.ts: nothing rendered loads anything from outside); every other
 * string is set as text, never as HTML.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderEvaluation } from './evaluation';
import { renderNextCell } from './next_cell';
import { renderComparison } from './compare';
import { renderTranscript } from './transcript';

/** The MIME type of a transcript. */
export const MIME_TYPE = 'application/vnd.ipyagent.transcript+json';
/** The MIME type of a comparison (%%compare): one transcript per run, side by side. */
export const COMPARISON_MIME_TYPE = 'application/vnd.ipyagent.comparison+json';
/** The MIME type of an evaluation (%%compare --over): the matrix and the summary. */
export const EVALUATION_MIME_TYPE = 'application/vnd.ipyagent.evaluation+json';

/** A widget that renders one transcript. */
export class TranscriptRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('ipyagent-transcript');
    this.addClass('jp-ipyagent-renderer');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    let data: unknown = model.data[this._mimeType];
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data);
      } catch {
        data = null;
      }
    }
    if (this._mimeType === EVALUATION_MIME_TYPE) {
      this.node.replaceChildren(...renderEvaluation(data));
      return Promise.resolve();
    }
    const render = this._mimeType === COMPARISON_MIME_TYPE ? renderComparison : renderTranscript;
    const start = performance.now();
    this.node.replaceChildren(...render(data));
    performance.measure('ipyagent-render', { start });
    const nextCell = this._mimeType === MIME_TYPE ? renderNextCell((data as { next_cell?: unknown } | null)?.next_cell, this) : null;
    if (nextCell) {
      this.node.appendChild(nextCell);
    }
    return Promise.resolve();
  }

  private _mimeType: string;
}

/** The renderer factory: safe (it sanitizes everything itself), so untrusted notebooks use it too. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE, COMPARISON_MIME_TYPE, EVALUATION_MIME_TYPE],
  createRenderer: options => new TranscriptRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'ipyagent:transcript',
  rendererFactory,
  // Lower ranks win: ahead of text/html (50) and text/markdown (60), the fallbacks beside it.
  rank: 40,
  dataType: 'json'
};

export default extension;
