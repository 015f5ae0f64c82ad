"""Reading stored artifacts: slices by offset and length, and search with positions.

Units: characters for text and JSON objects, rows for tables, items for JSON
arrays and lists, bytes for blobs and images. Search ranks passages with BM25
(the bm25s library) or, with ``regex=True``, returns every match; each hit says
where it is (character offset and line, or row / item index).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from ..core import BlobArtifact, ImageArtifact, JsonArtifact, ListArtifact, TableArtifact
from .artifacts import text_of
from .task_memory import MemoryEntry

#: Longest passage a search hit shows, characters.
PASSAGE_CHARS = 400
#: Text is cut into passages of about this many characters (at line ends when it can).
PASSAGE_TARGET = 600


def unit_of(artifact: Any) -> str:
    """What `read_slice` counts for `artifact`: ``rows``, ``items``, ``bytes`` or ``chars``."""
    if isinstance(artifact, TableArtifact):
        return "rows"
    if isinstance(artifact, ListArtifact) or (isinstance(artifact, JsonArtifact) and isinstance(artifact.value, list)):
        return "items"
    if isinstance(artifact, (BlobArtifact, ImageArtifact)):
        return "bytes"
    return "chars"


def read_slice(entry: MemoryEntry, offset: int = 0, length: int = 2000) -> dict[str, Any]:
    """A slice of the artifact: ``{"namespace", "type", "unit", "offset", "end", "total",
    "next_offset", "content"}``; `next_offset` is None at the end.

    Tables give rows (``content`` a list of row objects), JSON arrays and lists
    items, blobs and images bytes (``content`` UTF-8 text when the bytes decode,
    else base64 with ``"encoding": "base64"``), everything else characters.

    Raises:
        ValueError: a negative offset, or a length below 1.
    """
    if offset < 0:
        raise ValueError(f"offset must be 0 or more, not {offset}")
    if length < 1:
        raise ValueError(f"length must be 1 or more, not {length}")
    artifact = entry.artifact
    out: dict[str, Any] = {"namespace": entry.namespace, "type": entry.kind}
    if isinstance(artifact, TableArtifact):
        unit, items = "rows", artifact.value
    elif isinstance(artifact, JsonArtifact) and isinstance(artifact.value, list):
        unit, items = "items", artifact.value
    elif isinstance(artifact, ListArtifact):
        parts = artifact.value  # type: ignore[attr-defined]
        unit, items = "items", [{"type": a.type, "text": a.to_text()} for a in parts]
    elif isinstance(artifact, (BlobArtifact, ImageArtifact)):
        data = artifact.value
        chunk = data[offset:offset + length]
        out.update(unit="bytes", mime_type=artifact.mime_type)
        if text_of(artifact) is not None:  # the whole blob is UTF-8 text
            content: Any = chunk.decode("utf-8", errors="replace")
        else:
            content = base64.b64encode(chunk).decode()
            out["encoding"] = "base64"
        return _finish(out, offset, len(chunk), len(data), content)
    else:
        text = text_of(artifact) or ""
        piece = text[offset:offset + length]
        out["unit"] = "chars"
        return _finish(out, offset, len(piece), len(text), piece)
    chosen = items[offset:offset + length]
    out["unit"] = unit
    if unit == "rows":
        out["columns"] = artifact.columns  # type: ignore[union-attr]
    return _finish(out, offset, len(chosen), len(items), chosen)


def _finish(out: dict[str, Any], offset: int, n: int, total: int, content: Any) -> dict[str, Any]:
    end = min(offset + n, total)
    out.update(offset=offset, end=end, total=total, next_offset=end if end < total else None, content=content)
    if offset >= total and total:
        out["note"] = f"offset {offset} is past the end ({total} {out['unit']})"
    return out


@dataclass
class Passage:
    namespace: str
    text: str
    position: dict[str, int]


def passages(entry: MemoryEntry) -> list[Passage]:
    """The searchable pieces of an artifact with their positions: rows of a table, items of
    a JSON array, else runs of lines of about `PASSAGE_TARGET` characters. Binary content has none."""
    artifact, ns = entry.artifact, entry.namespace
    if isinstance(artifact, TableArtifact):
        return [
            Passage(ns, json.dumps(row, ensure_ascii=False, default=str), {"row": i})
            for i, row in enumerate(artifact.value)
        ]
    if isinstance(artifact, JsonArtifact) and isinstance(artifact.value, list):
        return [
            Passage(ns, json.dumps(v, ensure_ascii=False, default=str), {"item": i})
            for i, v in enumerate(artifact.value)
        ]
    text = text_of(artifact)
    if not text:
        return []
    found, start, line = [], 0, 1
    while start < len(text):
        end = min(len(text), start + PASSAGE_TARGET)
        if end < len(text):
            cut = text.rfind("\n", start + PASSAGE_TARGET // 3, end)
            end = cut + 1 if cut != -1 else end
        piece = text[start:end]
        if piece.strip():
            found.append(Passage(ns, piece, {"offset": start, "end": end, "line": line}))
        line += piece.count("\n")
        start = end
    return found


def _hit(
    p: Passage, score: float | None = None, span: tuple[int, int] | None = None, *, exact: bool = False
) -> dict[str, Any]:
    """A hit in passage `p`: the text shown is at most `PASSAGE_CHARS`, around `span` (a
    match) when given. With `exact` (a regex match) the position is the match's own;
    otherwise it is that of the text shown, so ``text[offset:end]`` is the passage."""
    hit: dict[str, Any] = {"namespace": p.namespace, "position": dict(p.position)}
    lo, hi = 0, len(p.text)
    if len(p.text) > PASSAGE_CHARS:
        centre = span[0] if span is not None else 0
        lo = max(0, min(centre - PASSAGE_CHARS // 3, len(p.text) - PASSAGE_CHARS))
        hi = lo + PASSAGE_CHARS
    if "offset" in p.position:
        base, line = p.position["offset"], p.position["line"]
        a, b = span if exact and span is not None else (lo, hi)
        hit["position"] = {"offset": base + a, "end": base + b, "line": line + p.text.count("\n", 0, a)}
    if exact and span is not None:
        hit["match"] = p.text[span[0] : span[1]]
    if score is not None:
        hit["score"] = round(float(score), 4)
    hit["passage"] = p.text[lo:hi]
    return hit


#: Seconds a model-supplied regex may run over the stored text.
REGEX_TIMEOUT = 1.0


def search(entries: list[MemoryEntry], query: str, *, regex: bool = False, limit: int = 5) -> list[dict[str, Any]]:
    """Matching passages across `entries`, best first (BM25), or in order (``regex=True``).

    Each hit: ``{"namespace", "position", "passage"}`` plus ``"score"`` (BM25) or
    ``"match"`` (regex); position is ``{"offset", "end", "line"}`` in characters
    (``line`` from 1) or ``{"row": i}`` / ``{"item": i}`` (from 0).

    Raises:
        ValueError: an empty query, a limit below 1, or a regex that does not compile.
    """
    if not query.strip():
        raise ValueError("the search query is empty")
    if limit < 1:
        raise ValueError(f"limit must be 1 or more, not {limit}")
    if regex:
        # The pattern comes from the model (and so, possibly, from text it read): the `regex`
        # module can stop a catastrophic backtrack, which stdlib `re` cannot (it holds the GIL).
        import regex as regex_module

        pool = [p for e in entries for p in _regex_units(e)]
        try:
            pattern = regex_module.compile(query, regex_module.IGNORECASE | regex_module.MULTILINE)
        except regex_module.error as exc:
            raise ValueError(f"the regex {query!r} does not compile: {exc}") from None
        hits = []
        try:
            for p in pool:
                for m in pattern.finditer(p.text, timeout=REGEX_TIMEOUT):
                    if m.end() > m.start():
                        hits.append(_hit(p, span=m.span(), exact=True))
                        if len(hits) >= limit:
                            return hits
        except TimeoutError:
            raise ValueError(
                f"the regex {query!r} took longer than {REGEX_TIMEOUT:g} s; use a simpler pattern or regex=false"
            ) from None
        return hits
    return _bm25([p for e in entries for p in passages(e)], query, limit)


def _regex_units(entry: MemoryEntry) -> list[Passage]:
    """Rows and items one by one; a text whole, so a match may cross passage ends."""
    artifact = entry.artifact
    if isinstance(artifact, TableArtifact) or (isinstance(artifact, JsonArtifact) and isinstance(artifact.value, list)):
        return passages(entry)
    text = text_of(artifact)
    return [Passage(entry.namespace, text, {"offset": 0, "end": len(text), "line": 1})] if text else []


def _bm25(pool: list[Passage], query: str, limit: int) -> list[dict[str, Any]]:
    if not pool:
        return []
    import bm25s

    corpus = bm25s.tokenize([p.text for p in pool], stopwords="en", show_progress=False, return_ids=False)
    terms = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if not terms:  # only stop words: match the words as they are
        terms = [w.lower() for w in re.findall(r"\w\w+", query)]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    known = [t for t in terms if t in retriever.vocab_dict]
    if not known:
        return []
    scores = retriever.get_scores(known)
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    pattern = re.compile("|".join(re.escape(t) for t in known), re.IGNORECASE)
    hits = []
    for i in order[:limit]:
        found = pattern.search(pool[i].text)
        hits.append(_hit(pool[i], float(scores[i]), found.span() if found else None))
    return hits
