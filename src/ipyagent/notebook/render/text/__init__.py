"""Plain text: a terminal's drawing of runs, transcripts, evaluations and sessions, and the text
fallbacks of saved outputs."""
