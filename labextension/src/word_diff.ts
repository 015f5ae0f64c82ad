/**
 * Word-level diff of two answers (drawn side by side by word_diff_view.ts).
 *
 * The texts are cut into tokens (words, runs of white space, single other characters), the
 * common start and end are set aside, and the middle is aligned by the longest common
 * subsequence of tokens. Past `LIMIT` token pairs in the middle (two long answers that differ
 * throughout) the middles are shown as wholly different rather than aligned.
 *
 * No imports: the tests run it in Node (tests/notebook/test_word_diff.py).
 */

/** Token pairs aligned at most (the alignment's table is this many cells). */
export const LIMIT = 4_000_000;

export type Piece = { kind: 'same' | 'del' | 'ins'; text: string };

/** Words (letters, digits, _), runs of white space, and each other character. */
export function tokens(text: string): string[] {
  return text.match(/\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu) ?? [];
}

function aligned(x: string[], y: string[]): Piece[] {
  const n = x.length;
  const m = y.length;
  const width = m + 1;
  const length = new Uint32Array((n + 1) * width); // length[i][j]: LCS of x[i:] and y[j:]
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      length[i * width + j] = x[i] === y[j] ? length[(i + 1) * width + j + 1] + 1
        : Math.max(length[(i + 1) * width + j], length[i * width + j + 1]);
    }
  }
  const out: Piece[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) {
      out.push({ kind: 'same', text: x[i++] });
      j++;
    } else if (i < n && (j === m || length[(i + 1) * width + j] >= length[i * width + j + 1])) {
      out.push({ kind: 'del', text: x[i++] }); // on a tie, what the left had comes first
    } else {
      out.push({ kind: 'ins', text: y[j++] });
    }
  }
  return out;
}

/** Consecutive pieces of one kind joined; empty ones dropped. */
function merged(pieces: Piece[]): Piece[] {
  const out: Piece[] = [];
  for (const piece of pieces) {
    const last = out[out.length - 1];
    if (!piece.text) {
      continue;
    }
    if (last && last.kind === piece.kind) {
      last.text += piece.text;
    } else {
      out.push({ ...piece });
    }
  }
  return out;
}

/** The pieces turning `a` into `b`: the same text, text only `a` has (del), only `b` has (ins). */
export function wordDiff(a: string, b: string, limit = LIMIT): Piece[] {
  const x = tokens(a);
  const y = tokens(b);
  let start = 0;
  while (start < x.length && start < y.length && x[start] === y[start]) {
    start++;
  }
  let endX = x.length;
  let endY = y.length;
  while (endX > start && endY > start && x[endX - 1] === y[endY - 1]) {
    endX--;
    endY--;
  }
  const midX = x.slice(start, endX);
  const midY = y.slice(start, endY);
  const middle = midX.length * midY.length > limit
    ? [{ kind: 'del' as const, text: midX.join('') }, { kind: 'ins' as const, text: midY.join('') }]
    : aligned(midX, midY);
  const head: Piece = { kind: 'same', text: x.slice(0, start).join('') };
  return merged([head, ...middle, { kind: 'same', text: x.slice(endX).join('') }]);
}
