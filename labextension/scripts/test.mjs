// The labextension's unit tests: type-checks them (tsconfig.test.json), bundles each
// test/*.test.ts with esbuild (jsdom left to Node) and runs them with Node's test runner.
// Usage: node scripts/test.mjs [test/name.test.ts ...]; exit code: Node's test runner's.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tests = process.argv.slice(2).map(p => resolve(p));
if (!tests.length) {
  const names = readdirSync(join(root, 'test'))
    .filter(f => f.endsWith('.test.ts'))
    .sort();
  tests.push(...names.map(f => join(root, 'test', f)));
}
const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.test.json')],
  { stdio: 'inherit' }
);
if (tsc.status !== 0) {
  console.error('test: the tests or the sources do not type-check');
  process.exit(tsc.status ?? 1);
}
// Inside the package, so that Node finds jsdom in node_modules from the bundles.
mkdirSync(join(root, 'lib-test'), { recursive: true });
const out = mkdtempSync(join(root, 'lib-test', 'run-'));
try {
  await build({
    entryPoints: tests,
    outdir: out,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outExtension: { '.js': '.mjs' },
    external: ['jsdom', 'typescript'],
    logLevel: 'warning',
    ignoreAnnotations: true // package.json's sideEffects would drop test/dom.ts, imported for its effect
  });
  const bundles = readdirSync(out)
    .filter(f => f.endsWith('.test.mjs'))
    .map(f => join(out, f));
  const run = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...bundles], {
    stdio: 'inherit',
    cwd: root
  });
  process.exitCode = run.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
