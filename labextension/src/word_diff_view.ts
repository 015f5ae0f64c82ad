/**
 * Two answers side by side, their differences marked word by word (word_diff.ts): what only
 * the left one has is struck through on the left, what only the right one has is underlined on
 * the right. Every string is set as text, never as HTML.
 */

import { el } from './transcript';
import { Piece, wordDiff } from './word_diff';

function side(pieces: Piece[], keep: 'del' | 'ins'): HTMLElement {
  const pre = el('pre', 'ipyagent-diff-text');
  for (const piece of pieces) {
    if (piece.kind === 'same') {
      pre.append(piece.text);
    } else if (piece.kind === keep) {
      pre.append(el(keep, `ipyagent-diff-${keep}`, piece.text));
    }
  }
  return pre;
}

/** Two answers side by side, titled, their differences marked word by word. */
export function diffView(a: string, b: string, titleA: string, titleB: string): HTMLElement {
  const pieces = wordDiff(a, b);
  const changed = pieces.filter(p => p.kind !== 'same').length;
  const view = el('div', 'ipyagent-diff');
  const left = el('div', 'ipyagent-diff-side');
  left.append(el('div', 'ipyagent-meta', titleA), side(pieces, 'del'));
  const right = el('div', 'ipyagent-diff-side');
  right.append(el('div', 'ipyagent-meta', titleB), side(pieces, 'ins'));
  view.append(left, right);
  if (!changed) {
    view.append(el('div', 'ipyagent-meta ipyagent-diff-same', 'the same text'));
  }
  return view;
}
