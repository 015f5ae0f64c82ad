/**
 * Transcript document -> DOM: the one renderer of a run, used by the saved
 * transcript (index.ts) and, part by part, by the live view (live_run.ts), so both
 * look the same; the HTML fallback (notebook/render/transcript.py) mirrors it.
 *
 * The document is read defensively: a missing or malformed field is skipped,
 * never thrown on, and a newer version is shown as far as it is understood.
 */

import { markedText, numberSources, renderCited, serverCard, sourcesNode } from './citations';
import { copyButton, renderMarkdown, settled } from './markdown';
import { el, imageNode, isObject, list, num, str } from './nodes';
import { fixed } from './numbers';
import { AUDIO_TYPES, RASTER_TYPES } from './policy';
import { sanitizeToFragment } from './safe_html';
import type {
  ArtifactSummary,
  Json,
  MediaPart,
  ToolCallPart,
  ToolProgress,
  Transcript,
  TranscriptMessage,
  Unchecked
} from './wire';

export type { Json } from './wire';
export { el, imageNode, isObject, list, num, str } from './nodes';

/** The transcript format version this renderer was written for. */
export const VERSION = 1;

function seconds(value: number): string {
  return `${fixed(value, 2)} s`;
}

/** How a call cut off by the run's end reads (core.transcript.STOPPED_WORDS). */
const STOPPED_WORDS: { [key: string]: string } = { interrupted: 'interrupted', timeout: 'stopped at the deadline' };

/** What a card's status line says before the outcome of a call the user approved (transcript_render.APPROVAL_WORDS). */
const APPROVAL_WORDS: { [key: string]: string } = {
  approved: 'approved by you · ',
  preapproved: 'approved in advance · ',
};

/** `done in 0.01 s` / `error in 0.01 s` / `not run`; a call that needed approval: `denied`
 * or `approved by you · done in 0.01 s`; a call the run's end cut off: `interrupted after 0.50 s`
 * or `stopped at the deadline after 0.50 s` (transcript_render.tool_status). */
export function toolStatus(call: Unchecked<ToolCallPart>): string {
  const approval = str(call.approval);
  if (approval === 'denied') {
    return 'denied';
  }
  const prefix = APPROVAL_WORDS[approval] ?? '';
  const stopped = str(call.stopped);
  if (stopped) {
    const words = STOPPED_WORDS[stopped] ?? stopped;
    const ran = num(call.duration_s);
    return prefix + (ran === null ? words : `${words} after ${seconds(ran)}`);
  }
  const status = str(call.status);
  if (status !== 'ok' && status !== 'error') {
    return prefix ? prefix.slice(0, -' · '.length) : 'not run';
  }
  const word = status === 'error' ? 'error' : 'done';
  const duration = num(call.duration_s);
  return prefix + (duration === null ? word : `${word} in ${seconds(duration)}`);
}

/** Drawn as an error: the tool failed (a denied call was not run, a stopped one was cut off: neither failed). */
function failed(call: Unchecked<ToolCallPart>): boolean {
  return call.status === 'error' && call.approval !== 'denied' && !str(call.stopped);
}

/** `image image/png, 4,033 bytes` (core.transcript.MediaPart.summary). */
function mediaSummary(part: Unchecked<MediaPart>): string {
  const name = str(part.name) ? ` ${str(part.name)}` : '';
  return `${str(part.kind)}${name} ${str(part.mime_type)}, ${(num(part.size) ?? 0).toLocaleString('en-US')} bytes`;
}

/** A file name for a download: the last segment of the part's name (a URI), safe characters only. */
function fileName(part: Unchecked<MediaPart>): string {
  const last = str(part.name).split(/[/\\]/).pop() || '';
  return last.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '').slice(0, 100) || 'download.bin';
}

/** An image, audio or file a tool returned (a `media` item of its call): an <img>, an <audio>
 * player, or a download link, each from a base64 data: URL (nothing loads from outside); a part
 * without data (too large, or a type not drawn) as a line saying what it is. */
export function mediaNode(part: Unchecked<MediaPart>): HTMLElement {
  const kind = str(part.kind);
  const mime = str(part.mime_type);
  const data = str(part.data).replace(/[^A-Za-z0-9+/=]/g, '');
  const node = el('div', 'ipyagent-media');
  const summary = mediaSummary(part);
  if (kind === 'image' && data && RASTER_TYPES.has(mime)) {
    const img = document.createElement('img');
    img.className = 'ipyagent-image';
    img.alt = summary;
    img.src = `data:${mime};base64,${data}`;
    node.append(img);
  } else if (kind === 'audio' && data && AUDIO_TYPES.has(mime)) {
    const audio = document.createElement('audio');
    audio.controls = true;
    audio.preload = 'none';
    audio.src = `data:${mime};base64,${data}`;
    node.append(audio);
  } else if (kind === 'blob' && data) {
    const link = document.createElement('a');
    link.className = 'ipyagent-download';
    link.download = fileName(part);
    link.href = `data:application/octet-stream;base64,${data}`; // downloaded, never opened as a page
    link.textContent = `download ${fileName(part)}`;
    node.append(link);
  } else {
    node.append(el('p', 'ipyagent-meta', `${summary}: ${data ? 'not a type shown here' : 'too large to show'}`));
    return node;
  }
  node.append(el('div', 'ipyagent-meta', summary));
  return node;
}

/** The footer line of a saved run: the figures the Python side computed when it wrote the document
 * (core/figures.py `footer_figures`), drawn as they are; a document written before it had them
 * shows its provider and state. */
export function footerText(t: Unchecked<Transcript>): string {
  const figures = list(t.footer).map(str);
  if (!figures.length) {
    const status = str(t.status);
    figures.push(str(t.provider) || 'unknown', ...(status && status !== 'completed' ? [status] : []));
  }
  return figures.join(' · ');
}

function sizeText(size: unknown): string {
  if (!isObject(size)) {
    return '';
  }
  const rows = num(size.rows);
  if (rows !== null) {
    return `${rows.toLocaleString('en-US')} rows × ${(num(size.columns) ?? 0).toLocaleString('en-US')} columns`;
  }
  for (const unit of ['bytes', 'items', 'chars']) {
    const n = num(size[unit]);
    if (n !== null) {
      return `${n.toLocaleString('en-US')} ${unit}`;
    }
  }
  return '';
}

/** A tool call's card; `partial_arguments`: the arguments' JSON text while it streams; `progress`:
 * a running MCP call's last report. `approval`: the live view's question (Approve / Deny, or an
 * MCP server's sampling request or elicitation), shown in the card, opened; `waiting`: what its
 * status line says meanwhile. */
export function toolCard(
  call: Unchecked<ToolCallPart> & { partial_arguments?: string; progress?: ToolProgress },
  approval?: HTMLElement,
  waiting = 'waiting for your approval'
): HTMLElement {
  const error = failed(call);
  const card = el('details', error ? 'ipyagent-tool ipyagent-tool-error' : 'ipyagent-tool');
  const summary = el('summary');
  const progress = typeof call.result !== 'string' && isObject(call.progress) ? call.progress : null;
  const running = progress ? progressText(progress) : '';
  summary.append(
    el('b', 'ipyagent-tool-name', str(call.name) || 'tool call'),
    ' ',
    el('span', 'ipyagent-meta', `${str(call.id)} · ${approval ? waiting : running || toolStatus(call)}`)
  );
  card.append(summary, el('div', 'ipyagent-meta', 'arguments'));
  const args = isObject(call.arguments) ? call.arguments : {};
  const text = typeof call.partial_arguments === 'string' ? call.partial_arguments : Object.keys(args).length ? JSON.stringify(args, null, 1) : '{}';
  card.append(el('pre', 'ipyagent-args', text));
  if (progress) {
    card.append(progressNode(progress));
  }
  if (approval) {
    card.setAttribute('open', '');
    card.append(approval);
  }
  for (const note of list(call.notes)) {
    card.append(el('div', 'ipyagent-meta ipyagent-note', str(note)));
  }
  const media = list(call.media).filter(isObject);
  if (typeof call.result === 'string' && (call.result || !media.length)) {
    card.append(
      el('div', 'ipyagent-meta', error ? 'error' : 'result'),
      el('pre', 'ipyagent-result', call.result)
    );
  }
  if (media.length) {
    card.setAttribute('open', ''); // an image, audio or file is what the call is for: shown, not folded
    card.append(...media.map(mediaNode));
  }
  return card;
}

/** `running: 3 of 4 · copying` (a total known) or `running: 3 · copying`: a call's last progress report. */
export function progressText(progress: ToolProgress): string {
  const done = num(progress.progress) ?? 0;
  const total = num(progress.total);
  const message = str(progress.message) ? ` · ${str(progress.message)}` : '';
  const of = total !== null ? ` of ${total.toLocaleString('en-US')}` : '';
  return `running: ${done.toLocaleString('en-US')}${of}${message}`;
}

/** A running call's progress: a bar when its total is known (an indeterminate one otherwise), and the numbers. */
export function progressNode(progress: ToolProgress): HTMLElement {
  const node = el('div', 'ipyagent-progress');
  const bar = document.createElement('progress');
  const total = num(progress.total);
  if (total !== null && total > 0) {
    bar.max = total;
    bar.value = Math.min(num(progress.progress) ?? 0, total);
  }
  node.append(bar, el('span', 'ipyagent-meta', progressText(progress)));
  return node;
}

function markdownBlock(className: string, text: string): HTMLElement {
  const node = el('div', `${className} jp-RenderedHTMLCommon`);
  node.append(...renderMarkdown(text)); // markdown-it (raw HTML escaped) + DOMPurify
  return node;
}

/** An off-prompt artifact: its title, and its preview when opened. */
export function artifactNode(artifact: Unchecked<ArtifactSummary>): HTMLElement {
  if (str(artifact.html)) {
    // As `%agent memory` draws it (Markdown, a table with "show N more rows", an image), sanitized again.
    const holder = el('div');
    holder.append(sanitizeToFragment(str(artifact.html)));
    const details = holder.querySelector('details.ipyagent-artifact');
    if (details instanceof HTMLElement) {
      return details;
    }
  }
  const bits = [str(artifact.kind) || 'unknown', sizeText(artifact.size)].filter(b => b);
  const title = `${str(artifact.namespace) || 'artifact'}: ${bits.join(', ')}` + (str(artifact.tool) ? `, from ${str(artifact.tool)}` : '');
  const details = el('details', 'ipyagent-artifact');
  details.append(el('summary', '', title), el('pre', '', str(artifact.preview)));
  return details;
}

/** The footer line: the figures, and a button that copies the answer. */
export function footerNode(text: string, answer: () => string): HTMLElement {
  const footer = el('div', 'ipyagent-footer');
  footer.append(el('span', 'ipyagent-footer-text', text), copyButton(answer, 'copy the answer (Markdown)'));
  return footer;
}

/** A user's message (`show_prompts`): its text as Markdown, other parts as a line. */
function promptNode(message: Unchecked<TranscriptMessage>): HTMLElement {
  const node = el('div', 'ipyagent-prompt');
  node.append(el('div', 'ipyagent-meta', 'user'));
  for (const part of list(message.parts)) {
    if (isObject(part) && part.type === 'text') {
      node.append(markdownBlock('ipyagent-prompt-text', str(part.text)));
    } else if (isObject(part)) {
      node.append(el('p', 'ipyagent-meta', str(part.summary) || str(part.type)));
    }
  }
  return node;
}

/**
 * The nodes of a transcript.
 *
 * @param data - the transcript document (any JSON: bad input gives an error line).
 */
/** The last text part of a transcript's assistant messages (null: none). */
function lastTextPart(data: Json): unknown {
  const texts = list(data.messages)
    .filter(m => isObject(m) && m.role === 'assistant')
    .flatMap(m => list((m as Json).parts))
    .filter(p => isObject(p) && p.type === 'text');
  return texts.length ? texts[texts.length - 1] : null;
}

/**
 * Why the runs' prices are unknown, each note once: a run's `price_note` when it has no cost.
 * A comparison shows them under its table (once per cell), not in each pane.
 */
export function priceNotes(transcripts: Iterable<unknown>): string[] {
  const notes = new Set<string>();
  for (const t of transcripts) {
    if (isObject(t) && t.price_note && t.cost == null) {
      notes.add(str(t.price_note));
    }
  }
  return [...notes];
}

/** The price notes as nodes (under a run's footer, or under a comparison's table). */
export function priceNoteNodes(notes: string[]): HTMLElement[] {
  return notes.map(note => el('div', 'ipyagent-meta ipyagent-price-note', note));
}

/** A transcript's nodes; `priceNote` false: without its price note (a comparison's pane). */
export function renderTranscript(data: unknown, priceNote = true): HTMLElement[] {
  if (!isObject(data) || data.format !== 'ipyagent.transcript') {
    return [el('div', 'ipyagent-error', '⚠ this output is not an ipyagent transcript')];
  }
  const nodes: HTMLElement[] = [];
  const sources = numberSources(list(data.messages));
  const version = num(data.version);
  if (version !== null && version > VERSION) {
    nodes.push(
      el('div', 'ipyagent-status', `transcript version ${version} is newer than this extension (${VERSION}); upgrade ipyagent to see all of it`)
    );
  }
  if (str(data.title)) {
    nodes.push(el('div', 'ipyagent-title', str(data.title)));
  }
  // A run stopped mid-answer: the end of its last text is drawn as a live view draws it (`settled`).
  const cutOff = data.status === 'interrupted' ? lastTextPart(data) : null;
  for (const message of list(data.messages)) {
    if (isObject(message) && message.role === 'user' && data.show_prompts === true) {
      nodes.push(promptNode(message)); // a thread's history: each prompt above its reply
    }
    if (!isObject(message) || message.role !== 'assistant') {
      continue; // the prompt is the cell above; tool results sit in their calls
    }
    for (const part of list(message.parts)) {
      if (!isObject(part)) {
        continue;
      }
      if (part.type === 'text' && list(part.citations).length) {
        const node = el('div', 'ipyagent-text jp-RenderedHTMLCommon');
        node.append(...renderCited(markedText(part, sources))); // markers become <sup> after sanitizing
        nodes.push(node);
      } else if (part.type === 'text') {
        nodes.push(markdownBlock('ipyagent-text', part === cutOff ? settled(str(part.text)) : str(part.text)));
      } else if (part.type === 'server_tool') {
        nodes.push(serverCard(part));
      } else if (part.type === 'reasoning') {
        const details = el('details', 'ipyagent-reasoning');
        details.append(el('summary', '', 'reasoning'));
        if (part.redacted === true && !str(part.text)) {
          details.append(el('p', '', '(redacted by the provider)'));
        } else {
          details.append(markdownBlock('ipyagent-reasoning-text', str(part.text)));
        }
        nodes.push(details);
      } else if (part.type === 'tool_call') {
        nodes.push(toolCard(part));
      } else if (part.type === 'other') {
        nodes.push(imageNode(part) ?? el('p', 'ipyagent-meta', str(part.summary)));
      }
    }
  }
  if (sources.size) {
    nodes.push(sourcesNode(sources.values()));
  }
  for (const artifact of list(data.artifacts)) {
    if (!isObject(artifact)) {
      continue;
    }
    nodes.push(artifactNode(artifact));
  }
  if (isObject(data.error)) {
    nodes.push(el('div', 'ipyagent-error', `⚠ ${str(data.error.message)}`));
  }
  if (data.status === 'interrupted') {
    nodes.push(el('div', 'ipyagent-status', '■ interrupted; the text above is partial'));
  }
  const answer = list(data.messages)
    .filter(m => isObject(m) && m.role === 'assistant')
    .flatMap(m => list((m as Json).parts))
    .filter(p => isObject(p) && p.type === 'text')
    .map(p => str((p as Json).text))
    .join('');
  nodes.push(footerNode(footerText(data), () => answer));
  if (priceNote) {  // why no cost is shown, and how to set it (the driver's note), under the output
    nodes.push(...priceNoteNodes(priceNotes([data])));
  }
  return nodes;
}
