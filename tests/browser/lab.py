"""What the browser tests share: writing a notebook, finding the extension's rendering of a cell,
the words a person sees, and the notebooks several tests start from."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import TYPE_CHECKING

import nbformat

from ipyagent.notebook.render.html import markdown_to_html

if TYPE_CHECKING:
    from ..support.stub_server import StubServer

#: The comparison's MIME type.
COMPARISON = "application/vnd.ipyagent.comparison+json"
#: A cell declaring `lookup`, a tool whose calls need approval (its runs are noted in `ran`).
LOOKUP = '''from ipyagent.tools import activity
ran = []

@activity(config={"requires_approval": True})
def lookup(query: str) -> str:
    """Look a query up."""
    ran.append(query)
    return "found it"'''


def shown(markdown: str) -> str:
    """The words a person sees of rendered `markdown` (the live view's own rendering of it)."""
    parser = HTMLParser()
    pieces: list[str] = []
    parser.handle_data = pieces.append  # type: ignore[method-assign]
    parser.feed(markdown_to_html(markdown))
    return words("".join(pieces))


def words(text: str) -> str:
    return " ".join(text.split())


def write_notebook(path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def renderer_of(cell):
    """The transcript as drawn by the extension's MIME renderer (not a fallback)."""
    return cell.locator(".jp-ipyagent-renderer")


def two_providers(lab, name: str, a: StubServer, b: StubServer, cell: str) -> None:
    """A notebook `name`: ipyagent loaded, ``openai:a`` served by `a` and the alias ``b`` by `b`, then `cell`."""
    write_notebook(lab.root / name, f"%load_ext ipyagent\n%provider openai:a --base-url {a.url}/v1\n"
                                     f"%provider --alias b openai:b --base-url {b.url}/v1", cell)
