"""Run a piece of the labextension's TypeScript in Node from a Python test: `run_ts` bundles a
TypeScript entry (its imports resolved from labextension/test, so ``../src/...`` and ``./dom``
work) with the labextension's esbuild, runs it with JSON on its standard input, and returns the
JSON it prints."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

LABEXT = Path(__file__).resolve().parents[2] / "labextension"
ESBUILD = LABEXT / "node_modules" / ".bin" / "esbuild"
NODE = shutil.which("node")
#: Why `run_ts` cannot run here (None: it can).
MISSING = None if NODE and ESBUILD.exists() and (LABEXT / "node_modules" / "jsdom").exists() else \
    "needs node and the labextension's npm install (make install)"

#: Reads standard input as JSON, for an entry's `main(input)`.
_MAIN = """
import { readFileSync } from 'node:fs';
const input = JSON.parse(readFileSync(0, 'utf8'));
Promise.resolve(main(input)).then(out => process.stdout.write(JSON.stringify(out)));
"""


def run_ts(source: str, data: Any) -> Any:
    """Bundle `source` (TypeScript defining ``function main(input)``) and return ``main(data)``, as JSON."""
    (LABEXT / "lib-test").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=LABEXT / "lib-test") as out:
        bundle = Path(out) / "entry.mjs"
        subprocess.run([str(ESBUILD), "--bundle", "--platform=node", "--format=esm", "--external:jsdom",
                        "--ignore-annotations", "--loader=ts", f"--sourcefile={LABEXT / 'test' / 'entry.ts'}",
                        f"--outfile={bundle}"],
                       input=source + _MAIN, text=True, check=True, capture_output=True, cwd=LABEXT / "test")
        result = subprocess.run([NODE, str(bundle)], input=json.dumps(data), capture_output=True, text=True,
                                timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)
