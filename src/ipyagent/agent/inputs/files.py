"""Documents for a user message: PDFs and text documents -> `DocumentBlock`.

A file path (``str`` or `Path`), bytes (a PDF by its ``%PDF-`` header, else UTF-8
text), or a `DocumentBlock`. Each driver translates the block to its own form
(Anthropic ``document`` blocks, Gemini inline data, OpenAI Chat ``file`` parts,
Responses ``input_file``); a provider that cannot take a PDF refuses it before
anything is sent.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ...core import DocumentBlock

#: File suffixes read as text documents, and their MIME types.
TEXT_TYPES: dict[str, str] = {
    ".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv",
    ".tsv": "text/tab-separated-values", ".json": "application/json", ".jsonl": "application/json",
    ".html": "text/html", ".htm": "text/html", ".xml": "text/xml", ".yaml": "text/yaml", ".yml": "text/yaml",
    ".py": "text/x-python", ".rst": "text/x-rst", ".log": "text/plain", ".tex": "text/x-tex",
}
#: The largest document attached (bytes): providers take PDFs up to about 32 MB.
MAX_BYTES = 32 * 1024 * 1024


def document_block(value: Any) -> DocumentBlock:
    """One document.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: neither a PDF nor a text document, or larger than `MAX_BYTES`.
        TypeError: a value of another kind.
    """
    if isinstance(value, DocumentBlock):
        return value
    if isinstance(value, (bytes, bytearray)):
        return _from_bytes(bytes(value), None)
    if isinstance(value, (str, Path)):
        path = Path(value).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no file {str(value)!r}")
        data = path.read_bytes()
        suffix = path.suffix.lower()
        if suffix != ".pdf" and suffix not in TEXT_TYPES and not data.startswith(b"%PDF-"):
            raise ValueError(f"{path.name}: not a PDF or a text document ({', '.join(sorted({'.pdf', *TEXT_TYPES}))})")
        return _from_bytes(data, path.name, TEXT_TYPES.get(suffix, "text/plain"))
    raise TypeError(f"a document is a file path, bytes or a DocumentBlock, not {type(value).__name__}")


def _from_bytes(data: bytes, name: str | None, text_type: str = "text/plain") -> DocumentBlock:
    if len(data) > MAX_BYTES:
        raise ValueError(f"{name or 'the document'} is {len(data):,} bytes; at most {MAX_BYTES:,} are sent")
    if data.startswith(b"%PDF-"):
        return DocumentBlock(mime_type="application/pdf", data=base64.b64encode(data).decode(), name=name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name or 'the bytes'}: not a PDF, and not UTF-8 text") from None
    return DocumentBlock(mime_type=text_type, text=text, name=name)


def document_blocks(value: Any) -> list[DocumentBlock]:
    """Documents from one value or a list of them (None: none)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [document_block(v) for v in value]
    return [document_block(value)]
