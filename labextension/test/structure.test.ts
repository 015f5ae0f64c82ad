/**
 * The labextension's source as a whole: no `any` (the wire is typed: wire.ts and the types
 * generated from the schema), no import circle between its files, and the generated types are
 * what the schema gives today.
 */

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

import ts from 'typescript';

const ROOT = resolve(process.cwd());
const SRC = join(ROOT, 'src');
const FILES = readdirSync(SRC)
  .filter(f => f.endsWith('.ts') && !f.endsWith('.d.ts'))
  .sort();

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(join(SRC, file), 'utf8'), ts.ScriptTarget.ES2019, true);
}

/** Each `any` written in `source`, as "file:line". */
function anys(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (node.kind === ts.SyntaxKind.AnyKeyword) {
      found.push(`${source.fileName}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The files of src/ that `file` imports (type-only imports too: a circle of types is a circle). */
function imports(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(join(SRC, file), 'utf8'), true, true);
  return importedFiles
    .map(i => i.fileName)
    .filter(name => name.startsWith('./'))
    .map(name => `${name.slice(2)}.ts`)
    .filter(name => FILES.includes(name));
}

/** An import circle of `graph` as a path ["a.ts", "b.ts", "a.ts"], or null. */
export function circle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): string[] | null => {
    if (state.get(file) === 'open') {
      return [...path.slice(path.indexOf(file)), file];
    }
    if (state.get(file) === 'done') {
      return null;
    }
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      const found = visit(next);
      if (found) {
        return found;
      }
    }
    path.pop();
    state.set(file, 'done');
    return null;
  };
  for (const file of graph.keys()) {
    const found = visit(file);
    if (found) {
      return found;
    }
  }
  return null;
}

test('no `any` in the source', () => {
  assert.deepEqual(
    FILES.flatMap(file => anys(parse(file))),
    []
  );
});

test('the check finds an `any` where there is one', () => {
  const source = ts.createSourceFile(
    'x.ts',
    'const a: any = 1; function f(b: unknown): any[] { return []; }',
    ts.ScriptTarget.ES2019,
    true
  );
  assert.deepEqual(anys(source), ['x.ts:1', 'x.ts:1']);
});

test('no import circle between the files of src/', () => {
  const graph = new Map(FILES.map(file => [file, imports(file)]));
  assert.ok(graph.get('live.ts')?.includes('live_run.ts') && graph.get('compare_live.ts')?.includes('live_run.ts'));
  assert.equal(circle(graph), null);
});

test('the circle check finds a circle, and the one live.ts and compare_live.ts made', () => {
  assert.deepEqual(
    circle(
      new Map([
        ['a.ts', ['b.ts']],
        ['b.ts', ['c.ts']],
        ['c.ts', ['b.ts']]
      ])
    ),
    ['b.ts', 'c.ts', 'b.ts']
  );
  assert.deepEqual(
    circle(
      new Map([
        ['live.ts', ['compare_live.ts']],
        ['compare_live.ts', ['live.ts']]
      ])
    ),
    ['live.ts', 'compare_live.ts', 'live.ts']
  );
  assert.equal(
    circle(
      new Map([
        ['a.ts', ['b.ts', 'c.ts']],
        ['b.ts', ['c.ts']],
        ['c.ts', []]
      ])
    ),
    null
  );
});

test('src/transcript_schema.ts is what the schema gives (node scripts/gen_types.mjs)', () => {
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'gen_types.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
});
