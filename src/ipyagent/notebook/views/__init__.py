"""Live views of a run: the widget (a kernel's page), the terminal's text, the saved transcript.

The modules are imported directly within the notebook layer; the names below load on first use, for a
caller that needs them only on some paths (the saved transcript: a kernel's page, never a terminal).
"""

from ..._lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {
    # a run's live view replaced by its saved transcript (HTML, Markdown, the comparison's table)
    "transcript_output": ("LiveTranscript",),
})

__all__ = [*__getattr__.exports]
