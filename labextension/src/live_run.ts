/**
 * One run drawn live: `LiveDoc` keeps the run as the kernel's messages describe it (wire.ts,
 * `RunMessage`: a snapshot, then ops), `LiveView` draws it with the transcript renderer's own
 * parts (transcript.ts, markdown.ts), so a run looks the same streaming and saved. The widget's
 * entry point (live.ts) makes one per run, and a comparison (compare_live.ts) one per pane's run.
 *
 * Messages only change the document; views redraw at most once per animation frame, and a frame
 * re-renders only the Markdown tail that changed.
 */

import { liveSourcesNode, serverCard } from './citations';
import { FrameScheduler } from './frame';
import { MarkdownStream } from './markdown';
import { Question, elicitationQuestion, samplingQuestion } from './questions';
import { artifactNode, el, footerNode, isObject, renderTranscript, toolCard } from './transcript';
import type {
  ArtifactSummary,
  Ask,
  FrontMessage,
  LiveOp,
  LiveStatus,
  RunMessage,
  SavedOutputParts,
  SegmentKind,
  ServerToolState,
  ToolCallState,
  Transcript,
  TranscriptCitation
} from './wire';

interface Segment {
  sid: number;
  kind: SegmentKind;
  text: string;
  rev: number;
  call: ToolCallState;
  artifact: ArtifactSummary;
  ask: Ask | null;
  /** A provider-side tool call's card (a `server` segment's). */
  card: ServerToolState;
  /** A text segment's cited sources, as they arrive. */
  citations: TranscriptCitation[];
}

/** The live footer's status, and when it came (`performance.now()`). */
interface Status extends LiveStatus {
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
  final: Transcript | null = null;
  /** The rest of the saved output the `end` message brought (saved_output.ts). */
  output: SavedOutputParts | null = null;
  listeners = new Set<() => void>();
  /** Sends a message to the kernel (the widget model's `send`). */
  send: (msg: FrontMessage) => void = () => undefined;

  /** One message of the run's (wire.ts `RunMessage`; anything else is ignored). */
  receive(msg: RunMessage): void {
    if (msg.type === 'snapshot') {
      this.load(msg.doc.ops);
      this.seq = msg.seq;
      this.resets++;
    } else if (msg.type === 'ops') {
      if (this.seq < 0 || msg.seq <= this.seq) {
        return; // before our snapshot: already in it
      }
      this.seq = msg.seq;
      msg.ops.forEach(op => this.apply(op));
    } else if (msg.type === 'end') {
      this.final = msg.doc;
      this.output = msg.output ?? null;
    } else {
      return;
    }
    this.listeners.forEach(listener => listener());
  }

  private load(ops: LiveOp[]): void {
    this.segments.clear();
    this.order = [];
    this.notices = [];
    this.error = null;
    this.interrupted = false;
    ops.forEach(op => this.apply(op));
  }

  /** One change (wire.ts `LiveOp`); a change to a segment not made yet is ignored. */
  apply(op: LiveOp): void {
    if (op[0] === 'seg') {
      const [, sid, kind, call] = op;
      if (!this.segments.has(sid)) {
        const fresh = { sid, kind, text: '', rev: 0, call: call || {}, artifact: {}, ask: null };
        this.segments.set(sid, { ...fresh, card: {}, citations: [] });
        this.order.push(sid);
      }
      return;
    }
    if (op[0] === 'notice') {
      this.notices.push(String(op[1]));
    } else if (op[0] === 'error') {
      this.error = String(op[1]);
    } else if (op[0] === 'interrupted') {
      this.interrupted = true;
    } else if (op[0] === 'status') {
      const { figures, ticking, elapsed } = op[1];
      this.status = { figures: figures || [], ticking: ticking ?? null, elapsed: elapsed || 0, at: performance.now() };
    } else {
      this.change(op);
    }
  }

  /** A change to one segment: its text grows, its call, card or artifact is updated, an approval asked or
   * answered, a source cited. */
  private change(op: Extract<LiveOp, [string, number, unknown]>): void {
    const segment = this.segments.get(op[1]);
    if (!segment) {
      return;
    }
    if (op[0] === 'text') {
      segment.text += op[2];
    } else if (op[0] === 'tool') {
      segment.call = { ...segment.call, ...op[2] };
    } else if (op[0] === 'server') {
      segment.card = isObject(op[2]) ? op[2] : segment.card;
    } else if (op[0] === 'cite') {
      if (!isObject(op[2])) {
        return;
      }
      segment.citations.push(op[2]);
    } else if (op[0] === 'artifact') {
      segment.artifact = op[2];
    } else if (op[0] === 'ask') {
      segment.ask = isObject(op[2]) ? op[2] : null;
    }
    segment.rev++;
  }

  /** The answer's text so far (the "copy" button of the footer). */
  get answer(): string {
    return this.order
      .map(sid => this.segments.get(sid)!)
      .filter(s => s.kind === 'text')
      .map(s => s.text)
      .join('');
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
  /** An MCP server's questions shown, by request id (a card redraw keeps their inputs). */
  private questions = new Map<string, Question>();
  /** Animation frames that changed the DOM (tests read this as data-frames). */
  frames = 0;

  /** Draw the ended run's price note (false in a comparison's pane: it is said under the table). */
  private priceNote: boolean;

  constructor(el: HTMLElement, doc: LiveDoc, priceNote = true) {
    this.el = el;
    this.doc = doc;
    this.priceNote = priceNote;
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
      this.el.replaceChildren(...renderTranscript(this.doc.final, this.priceNote));
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
      const body = el(
        'div',
        `${segment.kind === 'text' ? 'ipyagent-text' : 'ipyagent-reasoning-text'} jp-RenderedHTMLCommon`
      );
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
          ? serverCard({ ...segment.card, partial_input: segment.text })
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
    if (ask && ask.kind !== undefined) {
      // Kept across redraws of the card, so what the user typed stays (questions.ts).
      let question = this.questions.get(ask.request);
      if (!question) {
        const send = (msg: FrontMessage): void => this.doc.send(msg);
        question = ask.kind === 'sampling' ? samplingQuestion(ask, send) : elicitationQuestion(ask, send);
        this.questions.set(ask.request, question);
      }
      question.update(ask);
      const waiting = ask.kind === 'sampling' ? 'waiting for your approval' : 'waiting for your answer';
      return toolCard({ ...segment.call, arguments: ask.arguments }, question.node, waiting);
    }
    if (ask) {
      const request = ask.request;
      const bar = approvalBar(verdict => this.doc.send({ type: 'approve', request, verdict }), ask.preview);
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
  if (ticking === 'answer') {
    return `waiting for your answer · ${elapsed} s`;
  }
  return ticking === 'approval' ? `waiting for your approval · ${elapsed} s` : `${elapsed} s · streaming…`;
}

/** "Run this call?" with Approve and Deny; a click disables both and calls `decide`. `preview`: what
 * the call would change (a notebook edit's diff), drawn above them (`previewNode`). */
export function approvalBar(decide: (verdict: boolean) => void, preview?: string): HTMLElement {
  const bar = el('div', 'ipyagent-approval');
  if (typeof preview === 'string' && preview) {
    bar.append(previewNode(preview));
  }
  bar.append(el('span', 'ipyagent-approval-question', 'Run this call?'));
  const buttons: HTMLButtonElement[] = [];
  for (const [label, verdict] of [
    ['Approve', true],
    ['Deny', false]
  ] as const) {
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

/** A change's preview as text, one line each, lines a diff adds or removes marked for colour. */
export function previewNode(preview: string): HTMLElement {
  const pre = el('pre', 'ipyagent-preview');
  for (const line of preview.split('\n')) {
    const added = line.startsWith('+') && !line.startsWith('+++');
    const removed = line.startsWith('-') && !line.startsWith('---');
    pre.append(el('span', added ? 'ipyagent-added' : removed ? 'ipyagent-removed' : 'ipyagent-context', `${line}\n`));
  }
  return pre;
}
