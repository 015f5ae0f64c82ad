"""The labextension's own unit tests (labextension/test/*.test.ts), run by Node's test runner:
the sanitizer and its one imageLink, the frame scheduler, the live document's ops, the pure
helpers of the renderers, the generated wire types and the import graph. `labextension/scripts/test.mjs`
type-checks them, bundles each with the labextension's esbuild (so the sources are tested as they
are, not a stale build) and runs them with jsdom as the DOM."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[2] / "labextension"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(not (NODE and (LABEXT / "node_modules" / "jsdom").exists()),
                                reason="needs node and the labextension's npm install (make install)")


def test_the_typescript_unit_tests_pass() -> None:
    result = subprocess.run([NODE, "scripts/test.mjs"], cwd=LABEXT, capture_output=True, text=True, timeout=600)
    summary = [line for line in result.stdout.splitlines() if line.startswith("ℹ ")]
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    assert any(line.startswith("ℹ pass ") and line != "ℹ pass 0" for line in summary), result.stdout[-2000:]
