"""Code from an answer into a new cell (``--code``): the fenced code blocks of model Markdown.

Blocks are found by markdown-it (the parser that renders the answer), so a
fence inside a list or a block quote counts and a fence inside another does
not. The code goes to IPython's ``set_next_input`` (a new cell below, not run;
JupyterLab, Notebook 7, VS Code and terminal IPython honour it).
"""

from __future__ import annotations

from typing import Any

from ..render.html import _markdown

#: Fence labels that mean Python; an unlabelled fence counts as Python too.
PYTHON_LABELS = {"", "python", "py", "python3", "py3", "ipython", "ipython3", "pycon"}
#: Fence labels ``--code`` accepts as a language name without ambiguity in ``%agent fix --code QUESTION``.
KNOWN_LANGUAGES = {
    "python", "py", "r", "sql", "bash", "sh", "shell", "zsh", "javascript", "js", "typescript", "ts", "julia",
    "json", "yaml", "toml", "html", "css", "c", "cpp", "c++", "rust", "go", "java", "scala", "kotlin",
    "markdown", "md", "latex", "tex", "dockerfile", "makefile", "powershell", "ruby", "perl", "lua", "all",
}


def fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language label, code) of every fenced code block in `markdown`, in order; the label
    is the info string's first word, lower-cased (``""`` when there is none)."""

    blocks = []
    for token in _markdown().parse(markdown):
        if token.type == "fence":
            label = token.info.strip().split(maxsplit=1)[0].lower() if token.info.strip() else ""
            blocks.append((label.strip("{}."), token.content))
    return blocks


def _matches(label: str, language: str) -> bool:
    if language.lower() in PYTHON_LABELS:
        return label in PYTHON_LABELS
    return label == language.lower()


def pick_code(markdown: str, language: str = "python") -> str | None:
    """The code for a new cell: the first block in `language` (``python`` also takes
    unlabelled blocks), or every block joined by a blank line for ``all``; None when none."""
    blocks = fenced_blocks(markdown)
    if language == "all":
        chosen = [code for _, code in blocks]
    else:
        chosen = [code for label, code in blocks if _matches(label, language)][:1]
    code = "\n\n".join(c.rstrip("\n") for c in chosen)
    return code or None


def next_cell(shell: Any, code: str) -> None:
    """Put `code` into a new cell below the running one, not executed (``set_next_input``)."""
    shell.set_next_input(code, replace=False)
