// npm run build:live: the live view's files for the kernel (src/ipyagent/notebook/static/), bundled by
// esbuild from tsc's lib/: live.js (the front end, live.ts), live_loader.js (the widget's `_esm`,
// live_loader.ts) and live.css (the styles); then lib/live_build.js gets the front end's build id (the
// first 16 hex digits of live.js's SHA-256), which the labextension, bundled next, registers under
// (live_registry.ts) and the kernel computes from the same file (live_widget.py).
import { createHash } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, '../src/ipyagent/notebook/static');
for (const name of ['live', 'live_loader']) {
  await build({
    entryPoints: [join(root, 'lib', `${name}.js`)],
    outfile: join(out, `${name}.js`),
    bundle: true,
    format: 'esm',
    minify: true,
    legalComments: 'none',
    logLevel: 'warning'
  });
}
copyFileSync(join(root, 'style/index.css'), join(out, 'live.css'));
const id = createHash('sha256').update(readFileSync(join(out, 'live.js'))).digest('hex').slice(0, 16);
writeFileSync(join(root, 'lib/live_build.js'), `export const LIVE_BUILD = '${id}';\n`);
console.log(`live view build ${id}`);
