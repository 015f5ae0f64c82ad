/**
 * The live view of a run: the front end of ipyagent's anywidget
 * (src/ipyagent/notebook/views/live_widget.py), built into an ES module by esbuild.
 *
 * A widget's model is one run (live_run.ts), a whole %%compare cell (compare_live.ts, its
 * `kind` trait "compare"), both drawn with the transcript renderer's own parts, or the live
 * matrix of a %%compare --over cell (evaluation_live.ts, `kind` "evaluation": a page at a time).
 *
 * Protocol (custom widget messages, kernel -> browser):
 *   {type: "snapshot", seq, doc}  the run so far (the answer to our "hello")
 *   {type: "ops", seq, ops}        what changed since seq - 1 (coalesced, <= ~33/s)
 *   {type: "end", doc, output?}    the whole transcript, once, when the run ends, and the rest
 *                                  of the cell's saved output {mime, fallbacks, metadata,
 *                                  model_id} (a page reopened mid-run puts it in place of this
 *                                  widget's outputs: saved_output.ts)
 * and browser -> kernel: {type: "hello"} when a model is created (a cell run
 * live, or a page reopened mid-run), so that it catches up from the state, and
 * {type: "approve", request, verdict} when Approve (true) or Deny (false) is
 * clicked in a tool call's card.
 *
 * The messages are typed in wire.ts.
 */

import { CompareDoc, CompareLiveView } from './compare_live';
import { EvaluationDoc, EvaluationLiveView } from './evaluation_live';
import { LiveDoc, LiveView } from './live_run';
import { offerSavedOutput } from './saved_output';
import { isObject } from './transcript';
import type { CompareMessage, EvaluationMessage, KeyedRunMessage, RunMessage, WidgetModel } from './wire';

type Doc = LiveDoc | CompareDoc | EvaluationDoc;
const docs = new WeakMap<object, Doc>();

function newDoc(kind: unknown): Doc {
  return kind === 'compare' ? new CompareDoc() : kind === 'evaluation' ? new EvaluationDoc() : new LiveDoc();
}

/** The model's document: a run's, a whole %%compare cell's (its `kind` trait is "compare"), or a
 * %%compare --over cell's live matrix ("evaluation": evaluation_live.ts). */
function docOf(model: WidgetModel): Doc {
  let doc = docs.get(model);
  if (!doc) {
    const made = newDoc(model.get('kind'));
    docs.set(model, made);
    made.send = msg => model.send(msg);
    model.on('msg:custom', (msg: unknown) => {
      if (!isObject(msg) || typeof msg.type !== 'string') {
        return;
      }
      // From our kernel: its messages are the protocol's (wire.ts).
      if (made instanceof EvaluationDoc) {
        made.receive(msg as unknown as EvaluationMessage);
        return;
      }
      if (made instanceof CompareDoc) {
        made.receive(msg as CompareMessage | KeyedRunMessage);
      } else {
        made.receive(msg as RunMessage);
      }
      if (msg.type === 'end') {
        offerSavedOutput(made); // an output the kernel's display update missed (saved_output.ts)
      }
    });
    model.send({ type: 'hello' });
    doc = made;
  }
  return doc;
}

export default {
  initialize({ model }: { model: WidgetModel }): void {
    docOf(model);
  },
  render({ model, el }: { model: WidgetModel; el: HTMLElement }): () => void {
    const doc = docOf(model);
    const view = doc instanceof EvaluationDoc ? new EvaluationLiveView(el, doc)
      : doc instanceof CompareDoc ? new CompareLiveView(el, doc) : new LiveView(el, doc);
    return () => view.dispose();
  }
};
