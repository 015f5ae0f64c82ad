"""Execute a notebook headless with nbclient; write the executed copy and an HTML export.

Usage: python notebooks/execute.py NOTEBOOK [--out DIR] [--timeout SECONDS]

Exits 1 (after writing what ran) when a cell fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--out", type=Path, default=Path("build"))
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = parser.parse_args(argv)

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter

    nb = nbformat.read(args.notebook, as_version=4)
    # A live view's widget state is its loader, a few hundred bytes (live_widget.py): a plain client is fine.
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(args.notebook.parent.resolve())}})
    status = 0
    try:
        client.execute()
    except CellExecutionError as exc:
        print(f"{args.notebook}: a cell failed:\n{exc}", file=sys.stderr)
        status = 1
    args.out.mkdir(parents=True, exist_ok=True)
    executed = args.out / args.notebook.name
    nbformat.write(nb, executed)
    html, _ = HTMLExporter().from_notebook_node(nb)
    (args.out / args.notebook.with_suffix(".html").name).write_text(html, encoding="utf-8")
    print(f"wrote {executed} and {executed.with_suffix('.html')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
