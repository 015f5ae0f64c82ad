/**
 * A saved comparison's answers side by side, word by word (word_diff.ts): two panes picked
 * (the first two at first), the words only one of them has marked. Every string is set as
 * text, never as HTML.
 */

import { Json, el, isObject, list, num, str } from './transcript';
import { diffView } from './word_diff_view';

/** The answer's text of a transcript: its assistant messages' text parts. */
export function answerText(transcript: unknown): string {
  if (!isObject(transcript)) {
    return '';
  }
  return list(transcript.messages).filter(isObject).filter(m => m.role === 'assistant')
    .flatMap(m => list(m.parts)).filter(isObject).filter(p => p.type === 'text').map(p => str(p.text)).join('\n');
}

function select(titles: string[], chosen: number): HTMLSelectElement {
  const node = el('select', 'ipyagent-compare-diff-select') as HTMLSelectElement;
  node.append(...titles.map(t => el('option', '', t)));
  node.selectedIndex = chosen;
  return node;
}

/** "word diff": two panes' answers (each pane's run shown when the diff is drawn: `selected()`) compared. */
export function comparisonDiff(data: Json, titles: string[], selected: () => number[]): HTMLElement[] {
  const texts = new Map<string, string>();
  for (const entry of list(data.entries).filter(isObject)) {
    texts.set(`${num(entry.index)}/${num(entry.run) ?? 0}`, answerText(entry.transcript));
  }
  const text = (pane: number): string => texts.get(`${pane}/${selected()[pane] ?? 0}`) ?? '';
  if (titles.length < 2 || !titles.some((_, i) => text(i))) {
    return [];
  }
  const holder = el('details', 'ipyagent-compare-diff') as HTMLDetailsElement;
  const left = select(titles, 0);
  const right = select(titles, 1);
  const shown = el('div');
  const draw = (): void => {
    shown.replaceChildren(diffView(text(left.selectedIndex), text(right.selectedIndex), titles[left.selectedIndex],
      titles[right.selectedIndex]));
  };
  left.addEventListener('change', draw);
  right.addEventListener('change', draw);
  const bar = el('div', 'ipyagent-meta');
  bar.append('compare ', left, ' with ', right);
  holder.append(el('summary', '', 'word diff'), bar, shown);
  holder.addEventListener('toggle', () => {
    if (holder.open) {
      draw(); // the runs the panes show now
    }
  });
  return [holder];
}
