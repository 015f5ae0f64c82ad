/**
 * An MCP server's questions in a tool call's live card (src/ipyagent/notebook/views/asks.py):
 *
 * - a sampling request: the server's system prompt and messages, Approve, Edit (its last user
 *   message becomes editable) and Deny; answered with {type: "approve", request, verdict, text?};
 * - an elicitation: a form drawn from the fields of its requested schema (text, email, URL and
 *   date inputs, numbers within bounds, checkboxes, single and multiple choices, required marks,
 *   defaults), or a link to open; Accept / Decline / Cancel, answered with {type: "elicit",
 *   request, action, content}. A form the kernel found wrong comes back with `errors` per field.
 *
 * Everything is built as DOM with text nodes (server text is never HTML); a link opens only an
 * http(s) URL, in a new tab, with no referrer.
 */

import { el, num, str } from './nodes';
import type { ElicitationAsk, FormField, FrontMessage, SamplingAsk } from './wire';

export interface Question {
  node: HTMLElement;
  /** Show the question's latest state (a form's errors), buttons enabled again. */
  update(ask: SamplingAsk | ElicitationAsk): void;
}

type Send = (msg: FrontMessage) => void;
type Elicited = Extract<FrontMessage, { type: 'elicit' }>;

function buttonRow(choices: Array<[string, string, () => void]>): { row: HTMLElement; buttons: HTMLButtonElement[] } {
  const row = el('div', 'ipyagent-question-buttons');
  const buttons: HTMLButtonElement[] = [];
  for (const [label, name, act] of choices) {
    const button = el('button', `ipyagent-button ipyagent-${name}`, label) as HTMLButtonElement;
    button.type = 'button';
    button.addEventListener('click', () => {
      buttons.forEach(b => (b.disabled = true));
      act();
    });
    buttons.push(button);
  }
  row.append(...buttons);
  return { row, buttons };
}

/** A sampling request to approve, edit or deny. */
export function samplingQuestion(ask: SamplingAsk, send: Send): Question {
  const node = el('div', 'ipyagent-approval ipyagent-sampling');
  const tokens = num(ask.max_tokens);
  node.append(el('div', 'ipyagent-approval-question',
    `MCP server ${str(ask.server)} asks the model${tokens !== null ? ` (at most ${tokens} tokens)` : ''}. Send it?`));
  if (str(ask.system)) {
    node.append(el('div', 'ipyagent-meta', 'system'), el('pre', 'ipyagent-args', str(ask.system)));
  }
  for (const message of ask.messages) {
    node.append(el('div', 'ipyagent-meta', str(message.role)), el('pre', 'ipyagent-args', str(message.text)));
  }
  const hints = ask.hints.map(str).filter(h => h);
  if (hints.length) {
    node.append(el('div', 'ipyagent-meta', `model hints: ${hints.join(', ')}`));
  }
  const editor = document.createElement('textarea');
  editor.className = 'ipyagent-sampling-edit';
  editor.value = str(ask.editable);
  editor.rows = 4;
  editor.hidden = true;
  const request = ask.request;
  const answer = (verdict: boolean): void => {
    const edited = !editor.hidden && editor.value !== str(ask.editable);
    send({ type: 'approve', request, verdict, ...(verdict && edited ? { text: editor.value } : {}) });
  };
  const { row, buttons } = buttonRow([
    ['Approve', 'approve', () => answer(true)],
    ['Edit', 'edit', () => {
      editor.hidden = false;
      buttons.forEach(b => (b.disabled = b.textContent === 'Edit'));
      editor.focus();
    }],
    ['Deny', 'deny', () => answer(false)]
  ]);
  node.append(editor, row);
  return { node, update: () => undefined };
}

/** One form field's input element(s), filled with its default; `read()` gives its answer. */
function fieldInput(field: FormField): { node: HTMLElement; read: () => unknown } {
  const kind = field.kind;
  const options = field.options;
  const fallback = field.default;
  if (kind === 'boolean') {
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = fallback === true;
    return { node: box, read: () => box.checked };
  }
  if (kind === 'choices') {
    const picked = new Set(Array.isArray(fallback) ? fallback.map(String) : []);
    const group = el('span', 'ipyagent-choices');
    const boxes = options.map(([value, label]) => {
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.value = String(value);
      box.checked = picked.has(String(value));
      const label_ = el('label', '', ` ${String(label)} `);
      label_.prepend(box);
      group.append(label_);
      return box;
    });
    return { node: group, read: () => boxes.filter(b => b.checked).map(b => b.value) };
  }
  if (kind === 'choice') {
    const select = document.createElement('select');
    select.append(new Option('', ''));
    for (const [value, label] of options) {
      select.append(new Option(String(label), String(value), false, String(value) === String(fallback ?? '')));
    }
    return { node: select, read: () => select.value };
  }
  const input = document.createElement('input');
  const format = str(field.format);
  input.type = kind === 'number' || kind === 'integer' ? 'number'
    : format === 'email' ? 'email' : format === 'uri' ? 'url' : format === 'date' ? 'date' : 'text';
  if (kind === 'integer') {
    input.step = '1';
  } else if (kind === 'number') {
    input.step = 'any';
  }
  if (input.type === 'number') {
    const [low, high] = [num(field.minimum), num(field.maximum)];
    if (low !== null) input.min = String(low);
    if (high !== null) input.max = String(high);
  }
  input.value = fallback === undefined || fallback === null ? '' : String(fallback);
  return { node: input, read: () => input.value };
}

/** An elicitation: a form of its fields (or a link), Accept / Decline / Cancel. */
export function elicitationQuestion(ask: ElicitationAsk, send: Send): Question {
  const node = el('div', 'ipyagent-approval ipyagent-elicitation');
  node.append(el('div', 'ipyagent-approval-question', `MCP server ${str(ask.server)} asks: ${str(ask.message)}`));
  const request = ask.request;
  const readers: Array<[string, () => unknown]> = [];
  const errorsOf = new Map<string, HTMLElement>();
  const url = str(ask.url);
  if (ask.url !== undefined) {
    if (/^https?:\/\//i.test(url)) {
      const link = document.createElement('a');
      link.href = url;
      link.textContent = url;
      link.target = '_blank';
      link.rel = 'noopener noreferrer nofollow';
      link.referrerPolicy = 'no-referrer';
      node.append(el('div', 'ipyagent-meta', 'open this link, then say when you are done:'), link);
    } else {
      node.append(el('div', 'ipyagent-error', 'the server gave a link that is not http(s); it is not shown'));
    }
  }
  for (const field of ask.fields ?? []) {
    const row = el('div', 'ipyagent-field');
    const label = el('label', 'ipyagent-field-label', str(field.title) + (field.required === true ? ' *' : ''));
    const { node: input, read } = fieldInput(field);
    input.setAttribute('data-field', str(field.name));
    label.append(' ', input);
    row.append(label);
    if (str(field.description)) {
      row.append(el('div', 'ipyagent-meta', str(field.description)));
    }
    const error = el('div', 'ipyagent-error ipyagent-field-error');
    error.hidden = true;
    row.append(error);
    errorsOf.set(str(field.name), error);
    readers.push([str(field.name), read]);
    node.append(row);
  }
  const answer = (action: Elicited['action']): void => {
    const content: { [name: string]: unknown } = {};
    readers.forEach(([name, read]) => (content[name] = read()));
    send({ type: 'elicit', request, action, ...(action === 'accept' && readers.length ? { content } : {}) });
  };
  const { row, buttons } = buttonRow([
    [url ? 'Done' : 'Accept', 'accept', () => answer('accept')],
    ['Decline', 'decline', () => answer('decline')],
    ['Cancel', 'cancel', () => answer('cancel')]
  ]);
  node.append(row);
  return {
    node,
    update(latest: SamplingAsk | ElicitationAsk): void {
      const errors = latest.kind === 'elicitation' ? (latest.errors ?? {}) : {};
      errorsOf.forEach((box, name) => {
        box.textContent = str(errors[name]);
        box.hidden = !str(errors[name]);
      });
      buttons.forEach(b => (b.disabled = false));
    }
  };
}
