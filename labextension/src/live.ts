/**
 * The live view of a run: the front end of ipyagent's anywidget
 * (src/ipyagent/notebook/views/live_widget.py), built into an ES module by esbuild.
 *
 * It draws with the transcript renderer's own parts (transcript.ts,
 * markdown.ts), so a run looks the same streaming and saved.
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
 * Messages only change the document; views redraw at most once per animation
 * frame, and a frame re-renders only the Markdown tail that changed.
 */

import { CompareDoc, CompareLiveView } from './compare_live';
import { liveSourcesNode, serverCard } from './citations';
import { FrameScheduler } from './frame';
import { MarkdownStream } from './markdown';
import { offerSavedOutput } from './saved_output';
import { artifactNode, el, footerNode, renderTranscript, toolCard } from './transcript';

type Json = { [key: string]: any };

interface AnyModel {
  get(name: string): any;
  on(name: string, callback: (...args: any[]) => void): void;
  off(name: string, callback: (...args: any[]) => void): void;
  send(content: Json): void;
}

interface Segment {
  sid: number;
  kind: 'text' | 'reasoning' | 'tool' | 'artifact' | 'server';
  text: string;
  rev: number;
  call: Json;
  artifact: Json;
  ask: Json | null;
  /** A text segment's cited sources, as they arrive. */
  citations: Json[];
}

interface Status {
  figures: string[];
  ticking: string | null;
  elapsed: number;
  at: number;
}

/** The run as far as the browser knows it, shared by every view of one widget model. */
export class LiveDoc {
  seq = -1;
  resets = 0;
  segments = new Map<number, Segment>();
  order: number[] = [];
  notices: string[] = [];
  error: string | null = null;
  interrupted = false;
  status: Status = { figures: [], ticking: 'waiting', elapsed: 0, at: performance.now() };
  final: Json | null = null;
  /** The rest of the saved output the `end` message brought (saved_output.ts). */
  output: Json | null = null;
  listeners = new Set<() => void>();
  /** Sends a message to the kernel (the widget model's `send`). */
  send: (msg: Json) => void = () => undefined;

  receive(msg: Json): void {
    if (!msg || typeof msg !== 'object') {
      return;
    }
    if (msg.type === 'snapshot') {
      this.load(msg.doc || {});
      this.seq = msg.seq;
      this.resets++;
    } else if (msg.type === 'ops') {
      if (this.seq < 0 || msg.seq <= this.seq) {
        return; // before our snapshot: already in it
      }
      this.seq = msg.seq;
      for (const op of msg.ops || []) {
        this.apply(op);
      }
    } else if (msg.type === 'end') {
      this.final = msg.doc;
      this.output = msg.output ?? null;
    } else {
      return;
    }
    this.listeners.forEach(listener => listener());
  }

  private load(doc: Json): void {
    this.segments.clear();
    this.order = [];
    this.notices = [];
    this.error = null;
    this.interrupted = false;
    for (const op of doc.ops || []) {
      this.apply(op);
    }
  }

  private segment(sid: number): Segment | undefined {
    return this.segments.get(sid);
  }

  /** One change: ["seg", sid, kind, call], ["text", sid, text], ["tool", sid, call],
   * ["ask", sid, {request, name, arguments} | null] (an approval asked / answered),
   * ["server", sid, card] (a provider-side tool's card), ["cite", sid, citation] (a source of a text segment),
   * ["artifact", sid, summary], ["notice", text], ["error", text], ["interrupted"], ["status", status]. */
  apply(op: any[]): void {
    const [name, a, b, c] = op;
    if (name === 'seg' && !this.segments.has(a)) {
      const segment = { sid: a, kind: b, text: '', rev: 0, call: c || {}, artifact: {}, ask: null, citations: [] };
      this.segments.set(a, segment);
      this.order.push(a);
    } else if (name === 'text') {
      const segment = this.segment(a);
      if (segment) {
        segment.text += b;
        segment.rev++;
      }
    } else if (name === 'tool') {
      const segment = this.segment(a);
      if (segment) {
        segment.call = { ...segment.call, ...b };
        segment.rev++;
      }
    } else if (name === 'server') {
      const segment = this.segment(a);
      if (segment) {
        segment.call = b && typeof b === 'object' ? b : segment.call;
        segment.rev++;
      }
    } else if (name === 'cite') {
      const segment = this.segment(a);
      if (segment && b && typeof b === 'object') {
        segment.citations.push(b);
        segment.rev++;
      }
    } else if (name === 'artifact') {
      const segment = this.segment(a);
      if (segment) {
        segment.artifact = b;
        segment.rev++;
      }
    } else if (name === 'ask') {
      const segment = this.segment(a);
      if (segment) {
        segment.ask = b && typeof b === 'object' ? b : null;
        segment.rev++;
      }
    } else if (name === 'notice') {
      this.notices.push(String(a));
    } else if (name === 'error') {
      this.error = String(a);
    } else if (name === 'interrupted') {
      this.interrupted = true;
    } else if (name === 'status') {
      this.status = { figures: a.figures || [], ticking: a.ticking ?? null, elapsed: a.elapsed || 0, at: performance.now() };
    }
    void c;
  }

  /** The answer's text so far (the "copy" button of the footer). */
  get answer(): string {
    return this.order.map(sid => this.segments.get(sid)!).filter(s => s.kind === 'text').map(s => s.text).join('');
  }
}

interface Drawn {
  node: HTMLElement;
  rev: number;
  stream?: MarkdownStream;
  consumed: number;
  /** A text segment's sources list, after its text, and how many citations it shows. */
  sources?: HTMLElement;
  cited?: number;
}

/** One view (one output) of a live run. */
export class LiveView {
  readonly el: HTMLElement;
  private doc: LiveDoc;
  private drawn = new Map<number, Drawn>();
  private trailing: HTMLElement[] = [];
  private leading: HTMLElement[] = [];
  private resets = -1;
  private scheduler: FrameScheduler;
  private ticker = 0;
  private footer: HTMLElement | null = null;
  private ended = false;
  /** Animation frames that changed the DOM (tests read this as data-frames). */
  frames = 0;

  constructor(el: HTMLElement, doc: LiveDoc) {
    this.el = el;
    this.doc = doc;
    el.classList.add('ipyagent-transcript', 'ipyagent-live');
    this.ticker = window.setInterval(() => this.tick(), 200);
    this.scheduler = new FrameScheduler(() => this.draw(), doc.listeners);
  }

  dispose(): void {
    this.scheduler.dispose();
    window.clearInterval(this.ticker);
  }

  /** One frame; its time is a performance measure (`ipyagent-frame`, detail: the answer's length). */
  private draw(): void {
    if (this.ended) {
      return;
    }
    const start = performance.now();
    this.frames++;
    this.el.dataset.frames = String(this.frames);
    if (this.doc.final) {
      this.ended = true;
      this.el.classList.remove('ipyagent-live');
      this.el.replaceChildren(...renderTranscript(this.doc.final));
      window.clearInterval(this.ticker);
      performance.measure('ipyagent-render', { start, detail: { live: true } });
      return;
    }
    this.paint();
    performance.measure('ipyagent-frame', { start, detail: { chars: this.chars } });
  }

  /** The answer's length as drawn (characters of text and reasoning). */
  private get chars(): number {
    let chars = 0;
    this.drawn.forEach(drawn => (chars += drawn.consumed));
    return chars;
  }

  private paint(): void {
    const doc = this.doc;
    if (doc.resets !== this.resets) {
      this.resets = doc.resets;
      this.el.replaceChildren();
      this.drawn.clear();
      this.trailing = [];
      this.leading = [];
    }
    if (this.leading.length !== doc.notices.length) {
      this.leading.forEach(n => n.remove());
      this.leading = doc.notices.map(text => el('div', 'ipyagent-status', text));
      this.el.prepend(...this.leading);
    }
    const anchor = this.trailing[0] || null;
    for (const sid of doc.order) {
      const segment = doc.segments.get(sid)!;
      let drawn = this.drawn.get(sid);
      if (!drawn) {
        drawn = this.create(segment);
        this.drawn.set(sid, drawn);
        this.el.insertBefore(drawn.node, anchor);
      }
      if (drawn.rev !== segment.rev) {
        this.update(segment, drawn);
      }
    }
    this.trailing.forEach(n => n.remove());
    this.trailing = [];
    if (doc.error !== null) {
      this.trailing.push(el('div', 'ipyagent-error', `⚠ ${doc.error}`));
    }
    if (doc.interrupted) {
      this.trailing.push(el('div', 'ipyagent-status', '■ interrupted; the text above is partial'));
    }
    this.footer = footerNode(this.footerText(), () => doc.answer);
    this.trailing.push(this.footer);
    this.el.append(...this.trailing);
    // Nothing here reads layout back (a forced layout per frame cost more the longer the answer).
  }

  private create(segment: Segment): Drawn {
    if (segment.kind === 'text' || segment.kind === 'reasoning') {
      const body = el('div', `${segment.kind === 'text' ? 'ipyagent-text' : 'ipyagent-reasoning-text'} jp-RenderedHTMLCommon`);
      let node = body;
      if (segment.kind === 'reasoning') {
        node = el('details', 'ipyagent-reasoning');
        node.append(el('summary', '', 'reasoning'), body);
      }
      return { node, rev: -1, stream: new MarkdownStream(body), consumed: 0 };
    }
    return { node: el('div'), rev: -1, consumed: 0 };
  }

  private update(segment: Segment, drawn: Drawn): void {
    drawn.rev = segment.rev;
    if (drawn.stream) {
      drawn.stream.append(segment.text.slice(drawn.consumed));
      drawn.consumed = segment.text.length;
      drawn.stream.render();
      if (segment.citations.length !== (drawn.cited ?? 0)) {
        this.sources(segment, drawn);
      }
      return;
    }
    const node =
      segment.kind === 'tool'
        ? this.card(segment)
        : segment.kind === 'server'
          ? serverCard({ ...segment.call, partial_input: segment.text })
          : artifactNode(segment.artifact);
    drawn.node.replaceWith(node);
    drawn.node = node;
  }

  /** A text segment's sources, under its text: redrawn when a citation arrives (a few per answer). */
  private sources(segment: Segment, drawn: Drawn): void {
    const node = liveSourcesNode(segment.citations);
    if (drawn.sources) {
      drawn.sources.replaceWith(node);
    } else {
      drawn.node.after(node);
    }
    drawn.sources = node;
    drawn.cited = segment.citations.length;
  }

  private card(segment: Segment): HTMLElement {
    const ask = segment.ask;
    if (ask) {
      const request = ask.request;
      const bar = approvalBar(verdict => this.doc.send({ type: 'approve', request, verdict }));
      return toolCard({ ...segment.call, arguments: ask.arguments }, bar);
    }
    return toolCard({ ...segment.call, partial_arguments: segment.call.arguments ? undefined : segment.text });
  }

  private footerText(): string {
    const status = this.doc.status;
    const figures = [...status.figures];
    if (status.ticking) {
      const elapsed = (status.elapsed + (performance.now() - status.at) / 1000).toFixed(1);
      figures.push(tickingText(status.ticking, elapsed));
    }
    return figures.join(' · ');
  }

  private tick(): void {
    if (this.doc.status.ticking && this.footer && !this.ended) {
      const text = this.footer.querySelector('.ipyagent-footer-text');
      if (text) {
        text.textContent = this.footerText();
      }
    }
  }
}

/** The live footer's clock, by the kernel's `ticking` (view.py, `RunState.live_status`). */
function tickingText(ticking: string, elapsed: string): string {
  if (ticking === 'waiting') {
    return `waiting for the first token · ${elapsed} s`;
  }
  return ticking === 'approval' ? `waiting for your approval · ${elapsed} s` : `${elapsed} s · streaming…`;
}

/** "Run this call?" with Approve and Deny; a click disables both and calls `decide`. */
export function approvalBar(decide: (verdict: boolean) => void): HTMLElement {
  const bar = el('div', 'ipyagent-approval');
  bar.append(el('span', 'ipyagent-approval-question', 'Run this call?'));
  const buttons: HTMLButtonElement[] = [];
  for (const [label, verdict] of [['Approve', true], ['Deny', false]] as const) {
    const button = el('button', `ipyagent-button ipyagent-${verdict ? 'approve' : 'deny'}`, label) as HTMLButtonElement;
    button.type = 'button';
    button.addEventListener('click', () => {
      buttons.forEach(b => (b.disabled = true));
      decide(verdict);
    });
    buttons.push(button);
  }
  bar.append(...buttons);
  return bar;
}

const docs = new WeakMap<object, LiveDoc | CompareDoc>();

/** The model's document: a run's, or a whole %%compare cell's (its `kind` trait is "compare"). */
function docOf(model: AnyModel): LiveDoc | CompareDoc {
  let doc = docs.get(model);
  if (!doc) {
    const made = model.get('kind') === 'compare' ? new CompareDoc() : new LiveDoc();
    docs.set(model, made);
    made.send = msg => model.send(msg);
    model.on('msg:custom', (msg: Json) => {
      made.receive(msg);
      if (msg?.type === 'end') {
        offerSavedOutput(made); // an output the kernel's display update missed (saved_output.ts)
      }
    });
    model.send({ type: 'hello' });
    doc = made;
  }
  return doc;
}

export default {
  initialize({ model }: { model: AnyModel }): void {
    docOf(model);
  },
  render({ model, el }: { model: AnyModel; el: HTMLElement }): () => void {
    const doc = docOf(model);
    const view = doc instanceof CompareDoc ? new CompareLiveView(el, doc) : new LiveView(el, doc);
    return () => view.dispose();
  }
};
