"""``python -m ipyagent eval NOTEBOOK.ipynb``: the ``ipyagent`` command (`notebook.cli`)."""

import sys

from .notebook.cli import main

sys.exit(main())
