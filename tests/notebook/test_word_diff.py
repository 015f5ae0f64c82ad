"""The word diff of two answers (labextension/src/word_diff.ts), run in Node: tokens, the common
start and end set aside, the middle aligned word by word, and two long answers that differ
throughout shown as wholly different instead of aligned past the limit.

The TypeScript is bundled on the fly by the labextension's own esbuild, so the test reads the
source as it is, not a stale build.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[2] / "labextension"
ESBUILD = LABEXT / "node_modules" / ".bin" / "esbuild"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(not (NODE and ESBUILD.exists()),
                                reason="needs node and the labextension's npm install (make install)")

CASES = """
const out = {};
out.tokens = tokens("The capital is Paris, isn't it?  Yes.");
out.same = wordDiff("The capital is Paris.", "The capital is Paris.");
out.word = wordDiff("The capital of Australia is Sydney.", "The capital of Australia is Canberra.");
out.inserted = wordDiff("Lima is the capital.", "Lima is the capital of Peru.");
out.moved = wordDiff("a b c d", "b c d a");
out.unicode = wordDiff("Brasília é a capital.", "Brasília não é a capital.");
out.empty = wordDiff("", "new text");
const long = n => Array.from({length: n}, (_, i) => 'w' + i).join(' ');
out.limited = wordDiff(long(3000), long(3000).replace(/w/g, 'v'), 1000);
out.aligned = wordDiff("x " + long(50), "y " + long(50)).length;
console.log(JSON.stringify(out));
"""


def test_word_diff_marks_the_words_that_differ() -> None:
    bundled = subprocess.run([str(ESBUILD), str(LABEXT / "src" / "word_diff.ts"), "--format=esm"],
                             capture_output=True, text=True, check=True).stdout
    result = subprocess.run([NODE, "--input-type=module", "-e", bundled + CASES], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["tokens"] == ["The", " ", "capital", " ", "is", " ", "Paris", ",", " ", "isn", "'", "t", " ", "it", "?",
                             "  ", "Yes", "."]
    assert out["same"] == [{"kind": "same", "text": "The capital is Paris."}]
    assert out["word"] == [{"kind": "same", "text": "The capital of Australia is "}, {"kind": "del", "text": "Sydney"},
                           {"kind": "ins", "text": "Canberra"}, {"kind": "same", "text": "."}]
    assert out["inserted"] == [{"kind": "same", "text": "Lima is the capital"}, {"kind": "ins", "text": " of Peru"},
                               {"kind": "same", "text": "."}]
    assert "".join(p["text"] for p in out["moved"] if p["kind"] != "ins") == "a b c d"  # the left text, whole
    assert "".join(p["text"] for p in out["moved"] if p["kind"] != "del") == "b c d a"  # the right text, whole
    assert [p for p in out["moved"] if p["kind"] == "same"] == [{"kind": "same", "text": "b c d"}]
    assert out["unicode"] == [{"kind": "same", "text": "Brasília "}, {"kind": "ins", "text": "não "},
                              {"kind": "same", "text": "é a capital."}]
    assert out["empty"] == [{"kind": "ins", "text": "new text"}]
    # Past the limit the middles are not aligned: one deletion and one insertion, each whole.
    assert [p["kind"] for p in out["limited"]] == ["del", "ins"] and out["limited"][0]["text"].startswith("w0 w1")
    assert out["aligned"] == 3  # within it, the middle is aligned: "x" / "y", then the same 50 words
