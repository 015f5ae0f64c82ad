/**
 * Code offered as a new cell (`%%agent --code`, the transcript's `next_cell`): shown under the
 * answer with an "insert" and a "copy" button, for a notebook reopened after the run or a
 * front end that ignored the kernel's `set_next_input` payload.
 *
 * "insert" walks up the output's Lumino parents to the notebook (the widget whose model has a
 * shared model that can insert cells) and inserts a code cell below the cell holding this
 * output; outside a notebook it copies the code instead and says so. The code is only ever
 * set as text.
 */

import { Widget } from '@lumino/widgets';

/** Insert `code` as a code cell below the notebook cell that holds `host`; false outside a notebook. */
export function insertBelow(host: Widget, code: string): boolean {
  let child: Widget = host;
  let parent: Widget | null = host.parent;
  while (parent) {
    const candidate = parent as unknown as {
      widgets?: ReadonlyArray<Widget>;
      model?: { sharedModel?: { insertCell?: (index: number, cell: object) => unknown } } | null;
    };
    const shared = candidate.model?.sharedModel;
    if (Array.isArray(candidate.widgets) && shared && typeof shared.insertCell === 'function') {
      const index = candidate.widgets.indexOf(child);
      if (index >= 0) {
        shared.insertCell(index + 1, { cell_type: 'code', source: code });
        return true;
      }
    }
    child = parent;
    parent = parent.parent;
  }
  return false;
}

function copy(code: string): void {
  void navigator.clipboard?.writeText(code).catch(() => undefined);
}

function button(cls: string, label: string, title: string, onClick: (b: HTMLButtonElement) => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.className = `ipyagent-button ${cls}`;
  b.type = 'button';
  b.textContent = label;
  b.title = title;
  b.addEventListener('click', () => onClick(b));
  return b;
}

/** The next-cell block of a transcript, or null when it has none. */
export function renderNextCell(nextCell: unknown, host: Widget): HTMLElement | null {
  if (typeof nextCell !== 'object' || nextCell === null) {
    return null;
  }
  const { language, source } = nextCell as { language?: unknown; source?: unknown };
  if (typeof source !== 'string' || !source) {
    return null;
  }
  const lang = typeof language === 'string' ? language : 'python';
  const block = document.createElement('div');
  block.className = 'ipyagent-next-cell';
  block.dataset.language = lang;
  const head = document.createElement('div');
  head.className = 'ipyagent-meta';
  head.append(
    document.createTextNode(`code for a new cell below (${lang}) `),
    button('ipyagent-insert', 'insert', 'insert as a new cell below', b => {
      if (insertBelow(host, source)) {
        b.textContent = 'inserted';
      } else {
        copy(source);
        b.textContent = 'copied: paste it into a new cell';
      }
    }),
    button('ipyagent-copy', 'copy', 'copy the code', b => {
      copy(source);
      b.textContent = 'copied';
    })
  );
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  code.textContent = source;
  pre.append(code);
  block.append(head, pre);
  return block;
}
