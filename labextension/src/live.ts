/**
 * The live view of a run: the front end of ipyagent's anywidget
 * (src/ipyagent/notebook/views/live_widget.py), built into an ES module by esbuild.
 *
 * A widget's model is one run (live_run.ts) or a whole %%compare cell (compare_live.ts, its
 * `kind` trait "compare"); both draw with the transcript renderer's own parts.
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
import { LiveDoc, LiveView } from './live_run';
import { offerSavedOutput } from './saved_output';
import { isObject } from './transcript';
import type { CompareMessage, KeyedRunMessage, RunMessage, WidgetModel } from './wire';

const docs = new WeakMap<object, LiveDoc | CompareDoc>();

/** The model's document: a run's, or a whole %%compare cell's (its `kind` trait is "compare"). */
function docOf(model: WidgetModel): LiveDoc | CompareDoc {
  let doc = docs.get(model);
  if (!doc) {
    const made = model.get('kind') === 'compare' ? new CompareDoc() : new LiveDoc();
    docs.set(model, made);
    made.send = msg => model.send(msg);
    model.on('msg:custom', (msg: unknown) => {
      if (!isObject(msg) || typeof msg.type !== 'string') {
        return;
      }
      // From our kernel: its messages are the protocol's (wire.ts).
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
    const view = doc instanceof CompareDoc ? new CompareLiveView(el, doc) : new LiveView(el, doc);
    return () => view.dispose();
  }
};
