"""``%agent trace``: OpenTelemetry spans of every run (`ipyagent.trace`).

    %agent trace                        where spans go now (or off)
    %agent trace otlp [URL] [--content] every run's spans over OTLP/HTTP to URL (a receiver's base, such as
                                        http://localhost:6006, or its .../v1/traces); without URL,
                                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT,
                                        else http://localhost:4318. --content: prompts, replies and tool
                                        arguments and results go too, redacted
    %agent trace off                    no more spans (those finished are sent first)
"""

from __future__ import annotations

from IPython.core.error import UsageError

from ...agent import trace, tracing_status
from ...core import ConfigurationError

USAGE = "%agent trace [otlp [URL] [--content] | off]"


def trace_command(words: list[str]) -> None:
    """Run ``%agent trace WORDS`` and print where spans go now.

    Raises:
        UsageError: words that are not `USAGE`'s, the SDK not installed, a URL that is not http(s).
    """
    if words and words[0] == "off" and len(words) == 1:
        trace(False)
    elif words:
        rest = [w for w in words[1:] if w != "--content"]
        if words[0] != "otlp" or len(rest) > 1 or any(w.startswith("-") for w in rest):
            raise UsageError(f"%agent trace: use {USAGE}, not {' '.join(words)!r}")
        try:
            trace(rest[0] if rest else None, content="--content" in words[1:])
        except ConfigurationError as exc:
            raise UsageError(f"%agent {exc.message}") from None
    print(tracing_status())


__all__ = ["USAGE", "trace_command"]
